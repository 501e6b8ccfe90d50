#!/usr/bin/env python3
"""An Envoy ext_authz gRPC client written without psp-gateway's code: grpcio for the transport,
Envoy's own messages as published on PyPI (envoy-data-plane, betterproto2), to put
envoy.service.auth.v3.Authorization/Check to psp-gateway's ext_authz face as Envoy would.

Usage: check.py HOST:PORT [--ca PEM [--cert PEM --key PEM]] < checks.json

With --ca the channel is TLS, the server verified against that CA; with --cert and --key the
client presents that certificate.

stdin holds one Check description, or a JSON array of them (sent in order on one channel).
Each is an object with any of:

  method, path, host, sni                the request and the TLS server name Envoy saw
  context_extensions                     {key: value}, the route's extensions
  source_certificate_pem                 the client's certificate as PEM; URL-encoded here as
                                         Envoy's include_peer_certificate does
  source_address                         "IP:PORT" of the client as Envoy saw it
  headers                                {name: value}, Envoy's headers map (names lower-case)
  header_map                             [[name, value], ...], Envoy's encode_raw_headers form
  no_attributes                          true: a CheckRequest without attributes
  raw_hex                                send these bytes as the message, as they are
  body                                   the request body as Envoy's with_request_body
                                         passes it (HttpRequest.body)
  pad_bytes                              add a header x-pad of this many bytes (a message
                                         over the server's size limit)
  compression                            "gzip": the call's message compressed (grpcio's
                                         per-call compression, grpc-encoding: gzip)
  timeout                                seconds (default 10)

stdout: one JSON object per Check (an array for an array), with
  elapsed_ms                             the call's wall time, as the client measured it
  grpc_error {code, details}             when the call itself failed (no CheckResponse)
  status {code, message}                 the CheckResponse's google.rpc.Status
  ok {headers: [{key, value, append_action}], headers_to_remove}
  denied {status, headers: {name: value}, body}
  dynamic_metadata                       the Struct as plain JSON
"""

import json
import sys
import time
import urllib.parse

import grpc
from envoy_data_plane.envoy.config.core.v3 import (
    Address,
    HeaderMap,
    HeaderValue,
    SocketAddress,
)
from envoy_data_plane.envoy.service.auth.v3 import (
    AttributeContext,
    AttributeContextHttpRequest,
    AttributeContextPeer,
    AttributeContextRequest,
    AttributeContextTlsSession,
    CheckRequest,
    CheckResponse,
)

METHOD = "/envoy.service.auth.v3.Authorization/Check"


def url_encoded_pem(pem):
    # Envoy's urlEncodedPemEncodedPeerCertificate percent-encodes every byte but the
    # unreserved ones (RFC 3986 section 2.3).
    return urllib.parse.quote(pem, safe="-_.~")


def request_bytes(spec):
    if "raw_hex" in spec:
        return bytes.fromhex(spec["raw_hex"])
    if spec.get("no_attributes"):
        return bytes(CheckRequest())
    http = AttributeContextHttpRequest(
        method=spec.get("method", "GET"),
        path=spec.get("path", "/"),
        host=spec.get("host", ""),
        headers=dict(spec.get("headers", {})),
        protocol="HTTP/2",
    )
    if "body" in spec:
        http.body = spec["body"]
    if "pad_bytes" in spec:
        http.headers["x-pad"] = "a" * int(spec["pad_bytes"])
    if "header_map" in spec:
        http.header_map = HeaderMap(
            headers=[
                HeaderValue(key=name, raw_value=value.encode())
                for name, value in spec["header_map"]
            ]
        )
    source = AttributeContextPeer()
    if "source_certificate_pem" in spec:
        source.certificate = url_encoded_pem(spec["source_certificate_pem"])
    if "source_address" in spec:
        ip, _, port = spec["source_address"].rpartition(":")
        source.address = Address(
            socket_address=SocketAddress(address=ip.strip("[]"), port_value=int(port))
        )
    attributes = AttributeContext(
        source=source,
        request=AttributeContextRequest(http=http),
        context_extensions=dict(spec.get("context_extensions", {})),
    )
    if "sni" in spec:
        attributes.tls_session = AttributeContextTlsSession(sni=spec["sni"])
    return bytes(CheckRequest(attributes=attributes))


def plain(value):
    """A google.protobuf.Value (betterproto2) as plain JSON."""
    if value.struct_value is not None:
        return {k: plain(v) for k, v in value.struct_value.fields.items()}
    if value.list_value is not None:
        return [plain(v) for v in value.list_value.values]
    for kind in ("string_value", "number_value", "bool_value"):
        if getattr(value, kind) is not None:
            return getattr(value, kind)
    return None


def header_options(options):
    return [
        {
            "key": o.header.key,
            "value": o.header.value,
            "append_action": o.append_action.name,
            "append_set": o.append is not None,
        }
        for o in options
    ]


def answer(response):
    out = {}
    if response.status is not None:
        out["status"] = {"code": response.status.code, "message": response.status.message}
    else:
        out["status"] = {"code": 0, "message": ""}
    if response.ok_response is not None:
        ok = response.ok_response
        out["ok"] = {
            "headers": header_options(ok.headers),
            "headers_to_remove": list(ok.headers_to_remove),
        }
    if response.denied_response is not None:
        denied = response.denied_response
        out["denied"] = {
            "status": int(denied.status.code) if denied.status is not None else None,
            "headers": {o.header.key: o.header.value for o in denied.headers},
            "body": denied.body,
        }
    if response.error_response is not None:
        out["error_response"] = True
    if response.dynamic_metadata is not None:
        out["dynamic_metadata"] = {
            k: plain(v) for k, v in response.dynamic_metadata.fields.items()
        }
    return out


def check(channel, spec):
    call = channel.unary_unary(
        METHOD,
        request_serializer=lambda b: b,
        response_deserializer=CheckResponse.FromString,
    )
    started = time.perf_counter()
    try:
        compression = (
            grpc.Compression.Gzip if spec.get("compression") == "gzip" else None
        )
        response = call(
            request_bytes(spec), timeout=spec.get("timeout", 10), compression=compression
        )
        out = answer(response)
    except grpc.RpcError as e:
        out = {"grpc_error": {"code": e.code().name, "details": e.details()}}
    out["elapsed_ms"] = round((time.perf_counter() - started) * 1000, 3)
    return out


def channel_to(target, options):
    if "--ca" not in options:
        return grpc.insecure_channel(target)

    def read(flag):
        if flag not in options:
            return None
        with open(options[options.index(flag) + 1], "rb") as f:
            return f.read()

    credentials = grpc.ssl_channel_credentials(
        root_certificates=read("--ca"),
        private_key=read("--key"),
        certificate_chain=read("--cert"),
    )
    return grpc.secure_channel(target, credentials)


def main():
    target, options = sys.argv[1], sys.argv[2:]
    specs = json.load(sys.stdin)
    with channel_to(target, options) as channel:
        if isinstance(specs, list):
            print(json.dumps([check(channel, s) for s in specs]))
        else:
            print(json.dumps(check(channel, specs)))


if __name__ == "__main__":
    main()
