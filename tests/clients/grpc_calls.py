"""grpcio against shape's HTTP/2 faults, with generic handlers (raw bytes,
no code generation).

  serve         a gRPC server on a free port: says "listening PORT", then
                "call METHOD" for each call it gets; /shop.Cart/Checkout
                answers b"ok", /shop.Cart/Echo what it was sent
  call TARGET   one call of Checkout with a retry policy for UNAVAILABLE
                (up to 5 attempts); prints "ok" and the answer, or the
                status it failed with
  stall TARGET  on one channel (one HTTP/2 connection), a Checkout with
                the metadata x-chaos: hang and a deadline of 3 s, and
                while it waits five more; prints how many of those came
                back, then the first one's status
  echo TARGET   a 64 MiB Echo, both ways at once on one stream; prints
                "ok" if it came back whole
"""

import hashlib
import json
import random
import sys
from concurrent import futures

import grpc

BIG = 100 << 20
SIZES = [("grpc.max_send_message_length", BIG), ("grpc.max_receive_message_length", BIG)]


def serve():
    def checkout(request, context):
        print("call /shop.Cart/Checkout", flush=True)
        return b"ok"

    def echo(request, context):
        print("call /shop.Cart/Echo", flush=True)
        return request

    handler = grpc.method_handlers_generic_handler(
        "shop.Cart",
        {
            "Checkout": grpc.unary_unary_rpc_method_handler(checkout),
            "Echo": grpc.unary_unary_rpc_method_handler(echo),
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=SIZES)
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"listening {port}", flush=True)
    server.wait_for_termination()


def channel(target):
    config = {
        "methodConfig": [
            {
                "name": [{"service": "shop.Cart", "method": "Checkout"}],
                "retryPolicy": {
                    "maxAttempts": 5,
                    "initialBackoff": "0.05s",
                    "maxBackoff": "0.2s",
                    "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            }
        ]
    }
    options = [("grpc.enable_retries", 1), ("grpc.service_config", json.dumps(config))]
    return grpc.insecure_channel(target, options=options + SIZES)


def call(target):
    with channel(target) as open_channel:
        checkout = open_channel.unary_unary("/shop.Cart/Checkout")
        try:
            print("ok", checkout(b"cart", timeout=20).decode())
        except grpc.RpcError as err:
            print(err.code().name, err.details())


def stall(target):
    with channel(target) as open_channel:
        checkout = open_channel.unary_unary("/shop.Cart/Checkout")
        hanging = checkout.future(b"cart", timeout=3, metadata=[("x-chaos", "hang")])
        others = sum(checkout(b"cart", timeout=20) == b"ok" for _ in range(5))
        try:
            hanging.result()
            print(others, "answered")
        except grpc.RpcError as err:
            print(others, err.code().name)


def echo(target):
    body = random.Random(7).randbytes(64 << 20)
    with channel(target) as open_channel:
        back = open_channel.unary_unary("/shop.Cart/Echo")(body, timeout=120)
    same = hashlib.sha256(back).digest() == hashlib.sha256(body).digest()
    print("ok" if same else f"came back as {len(back)} other bytes")


{"serve": serve, "call": lambda: call(sys.argv[2]), "stall": lambda: stall(sys.argv[2]),
 "echo": lambda: echo(sys.argv[2])}[sys.argv[1]]()
