#!/usr/bin/env python3
"""Tiny Chat Completions server (stdlib only, 127.0.0.1) that keeps the RAW request bytes:
answers POST /v1/chat/completions from a pvisor model script (turn = number of assistant runs in
the request), logs {seq, headers, raw (latin-1 str of the bytes), body} per line.

    python3 capture_server.py --script S.json --log L.jsonl --port-file P
"""
import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
SEQ = [0]


def turn_of(messages):
    n, prev = 0, None
    for m in messages:
        if m.get("role") == "assistant" and prev != "assistant":
            n += 1
        prev = m.get("role")
    return n


def make_handler(script, log):
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            body = json.loads(raw)
            t = turn_of(body.get("messages", []))
            turns = script["turns"]
            tr = turns[t] if t < len(turns) else {"text": "(script exhausted)"}
            msg = {"role": "assistant", "content": tr.get("text") or None}
            if tr.get("tool_calls"):
                msg["tool_calls"] = [{"id": f"call_cap_t{t:03d}_{i}", "type": "function",
                                      "function": {"name": c["name"], "arguments": json.dumps(c.get("input", c.get("arguments")))}}
                                     for i, c in enumerate(tr["tool_calls"])]
            ans = {"id": f"chatcmpl-cap-t{t:03d}", "object": "chat.completion", "created": 0, "model": body.get("model"),
                   "choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls" if tr.get("tool_calls") else "stop"}],
                   "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
            out = json.dumps(ans).encode()
            with LOCK:
                SEQ[0] += 1
                with open(log, "a") as f:
                    f.write(json.dumps({"seq": SEQ[0], "turn": t, "headers": dict(self.headers),
                                        "raw": raw.decode("latin-1"), "body": body}) + "\n")
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

    return H


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--script", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--port-file", required=True)
    a = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(json.load(open(a.script)), a.log))
    with open(a.port_file, "w") as f:
        f.write(str(srv.server_address[1]))
    srv.serve_forever()


if __name__ == "__main__":
    main()
