"""air_host: the resident Python side of npubench's `air` backend (engine/nb_air.c spawns it).
Loads one mlir-air verify adapter once, then serves prefill / decode_step frames on two pipes.

Wire format (version 1, little-endian), the same both ways:
  header  24 bytes: magic b"NBAH", u16 version, u16 type, u32 seq, u32 json_len, u64 bin_len
  body    json_len bytes of UTF-8 JSON, then bin_len bytes of arrays the JSON points into as
          {"off": byte offset, "n": elements, "dtype": "f32" | "i64"}.
Requests: HELLO, SETUP, PREFILL, DECODE, TOKENIZE, SHUTDOWN; the answer to type T is T | 0x80,
or ERROR {"kind", "message", "traceback"}.  A frame that cannot be read (bad magic, version,
sizes over the bounds) gets an ERROR and the host exits: the stream has lost its framing.
A bad request inside a good frame, or an adapter that raises, gets an ERROR and the host
keeps serving.  The adapter's own prints go to stderr, never into the protocol pipe.
"""

import importlib
import json
import os
import struct
import sys
import time
import traceback

MAGIC = b"NBAH"
VERSION = 1
HEADER = struct.Struct("<4sHHIIQ")
T_HELLO, T_SETUP, T_PREFILL, T_DECODE, T_TOKENIZE, T_SHUTDOWN = 1, 2, 3, 4, 5, 6
T_OK, T_ERROR = 0x80, 0xFF
MAX_JSON = 1 << 20
MAX_REQUEST_BIN = 64 << 20  # requests carry token ids only


class FrameError(Exception):
    """The stream cannot be trusted any more: answer, then exit."""


class RequestError(Exception):
    """A well-framed request that asks for something invalid: answer, keep serving."""


def read_exact(fd, n):
    chunks, got = [], 0
    while got < n:
        b = os.read(fd, min(n - got, 1 << 20))
        if not b:
            return None if got == 0 else b"".join(chunks)
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def read_frame(fd):
    """(type, seq, json object, bin bytes), or None at a clean end of stream."""
    head = read_exact(fd, HEADER.size)
    if head is None:
        return None
    if len(head) != HEADER.size:
        raise FrameError("truncated frame header (%d of %d bytes)" % (len(head), HEADER.size))
    magic, version, ftype, seq, jlen, blen = HEADER.unpack(head)
    if magic != MAGIC:
        raise FrameError("bad magic %r (expected %r)" % (magic, MAGIC))
    if version != VERSION:
        raise FrameError("protocol version %d, this host speaks %d" % (version, VERSION))
    if jlen > MAX_JSON:
        raise FrameError("json_len %d over the limit %d" % (jlen, MAX_JSON))
    if blen > MAX_REQUEST_BIN:
        raise FrameError("bin_len %d over the limit %d" % (blen, MAX_REQUEST_BIN))
    body = read_exact(fd, jlen + blen) if jlen + blen else b""
    if body is None or len(body) != jlen + blen:
        raise FrameError("truncated frame body")
    try:
        meta = json.loads(body[:jlen].decode("utf-8")) if jlen else {}
    except (UnicodeDecodeError, ValueError) as e:
        return ftype, seq, RequestError("frame json: %s" % e), b""
    if not isinstance(meta, dict):
        return ftype, seq, RequestError("frame json: expected an object"), b""
    return ftype, seq, meta, body[jlen:]


def write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class Blobs:
    """Collects arrays for one answer; desc() is what the JSON says about each."""

    def __init__(self, np):
        self.np = np
        self.parts, self.size = [], 0

    def add(self, arr, dtype):
        np = self.np
        a = np.ascontiguousarray(np.asarray(arr), dtype="<f4" if dtype == "f32" else "<i8")
        raw = memoryview(a).cast("B")  # written from the array itself: no copy
        desc = {"off": self.size, "n": int(a.size), "dtype": dtype, "shape": list(a.shape)}
        self.parts.append(raw)
        self.size += len(raw)
        return desc


def send(fd, ftype, seq, meta, blobs=None):
    j = json.dumps(meta, separators=(",", ":")).encode("utf-8")
    parts = blobs.parts if blobs else []
    blen = sum(len(p) for p in parts)
    write_all(fd, HEADER.pack(MAGIC, VERSION, ftype, seq, len(j), blen) + j)
    for p in parts:
        write_all(fd, p)


def int_field(meta, name, lo, hi):
    v = meta.get(name)
    if not isinstance(v, int) or isinstance(v, bool) or v < lo or v > hi:
        raise RequestError("%s: expected an integer in [%d, %d], got %r" % (name, lo, hi, v))
    return v


class Host:
    def __init__(self):
        self.np = None
        self.adapter = None
        self.runner = None
        self.tokenizer = None
        self.max_seq = 0
        self.lite = True

    def hello(self, meta):
        import numpy  # the adapters need it; a missing numpy is a setup error, said early

        self.np = numpy
        return {"version": VERSION, "pid": os.getpid(), "python": sys.version.split()[0],
                "numpy": numpy.__version__}

    def setup(self, meta):
        if self.runner is not None:
            raise RequestError("SETUP: this host is already set up (one runner per host)")
        llms = meta.get("llms_dir")
        adapter = meta.get("adapter")
        if not isinstance(llms, str) or not os.path.isdir(llms):
            raise RequestError("llms_dir: %r is not a directory" % (llms,))
        if not isinstance(adapter, str) or not adapter:
            raise RequestError("adapter: expected a dotted module path")
        self.max_seq = int_field(meta, "max_seq", 1, 1 << 20)
        llms = os.path.abspath(llms)
        # verify_runner.py's order: llms/verify first, then llms/ (its two inserts at 0)
        for p in (llms, os.path.join(llms, "verify")):
            while p in sys.path:
                sys.path.remove(p)
            sys.path.insert(0, p)
        t0 = time.perf_counter()
        self.adapter = importlib.import_module(adapter)
        choice = meta.get("model") or getattr(self.adapter, "DEFAULT_MODEL", None)
        if not choice:
            raise RequestError("model: none given and %s has no DEFAULT_MODEL" % adapter)
        model_name = self.adapter.resolve_model(choice)
        hf_ref = (self.adapter.hf_reference(model_name)
                  if hasattr(self.adapter, "hf_reference") else model_name)
        self.tokenizer = self.load_tokenizer(meta.get("tokenizer", "auto"), model_name)
        config = self.adapter.build_config()
        self.lite = bool(meta.get("lite_mode", True))
        self.runner = self.adapter.build_runner(
            model_name=model_name, config=config, max_seq=self.max_seq,
            tokenizer=self.tokenizer, npu_attn=bool(meta.get("npu_attn", True)),
            lite_mode=self.lite)
        setup_ms = (time.perf_counter() - t0) * 1000.0
        n_layers = getattr(config, "n_layers", None)
        return {
            "setup_ms": setup_ms,
            "runner": str(getattr(self.runner, "name", type(self.runner).__name__)),
            "model_choice": str(choice),
            "model_name": str(model_name),
            "hf_reference": str(hf_ref),
            "n_layers": n_layers if isinstance(n_layers, int) else 0,
            "tokenizer": self.tokenizer is not None,
            # per-layer states on request: built non-lite, or a runner whose lite_mode
            # attribute its prefill reads (mlir-air's adapters keep it on self)
            "layers": (not self.lite) or hasattr(self.runner, "lite_mode"),
        }

    def load_tokenizer(self, how, model_name):
        if how == "none":
            return None
        if hasattr(self.adapter, "build_tokenizer"):
            return self.adapter.build_tokenizer(model_name)
        try:
            from transformers import AutoTokenizer
        except ImportError:
            if how == "hf":
                raise
            return None
        return AutoTokenizer.from_pretrained(model_name)

    def need_runner(self):
        if self.runner is None:
            raise RequestError("no SETUP yet")

    def prefill(self, meta, blob):
        self.need_runner()
        np = self.np
        ids = self.array(meta, blob, "ids", "i64")
        if ids.size < 1 or ids.size > self.max_seq:
            raise RequestError("ids: %d tokens, expected 1..max_seq %d" % (ids.size, self.max_seq))
        if ids.min() < 0:
            raise RequestError("ids: negative token id %d" % int(ids.min()))
        want = bool(meta.get("layers", False))
        switch = want and self.lite and hasattr(self.runner, "lite_mode")
        if switch:
            self.runner.lite_mode = False
        try:
            t0 = time.perf_counter()
            rec = self.runner.prefill(ids.astype(np.int64))
            host_ms = (time.perf_counter() - t0) * 1000.0
        finally:
            if switch:
                self.runner.lite_mode = True
        out = Blobs(np)
        ans = {"top1_token": int(rec.top1_token), "host_ms": host_ms,
               "logits": out.add(np.asarray(rec.logits_at_pred).reshape(-1), "f32")}
        if want:
            fh = np.asarray(rec.final_hidden_normed)
            ans["final_hidden_normed"] = out.add(fh, "f32") if fh.size else None
            layers = []
            for d in rec.layer_intermediates or []:
                layers.append({str(k): out.add(v, "f32") for k, v in d.items()
                               if v is not None and np.asarray(v).size})
            ans["layers"] = layers
        return ans, out

    def decode(self, meta):
        self.need_runner()
        token = int_field(meta, "token", 0, (1 << 31) - 1)
        pos = int_field(meta, "pos", 0, self.max_seq - 1)
        t0 = time.perf_counter()
        rec = self.runner.decode_step(token, pos)
        host_ms = (time.perf_counter() - t0) * 1000.0
        out = Blobs(self.np)
        return {"top1_token": int(rec.top1_token), "host_ms": host_ms,
                "logits": out.add(self.np.asarray(rec.lm_head_logits).reshape(-1), "f32")}, out

    def tokenize(self, meta):
        self.need_runner()
        text = meta.get("text")
        if not isinstance(text, str):
            raise RequestError("text: expected a string")
        if self.tokenizer is None:
            raise RequestError("this deployment has no tokenizer (transformers not importable)")
        out = Blobs(self.np)
        return {"ids": out.add(list(self.tokenizer.encode(text)), "i64")}, out

    def array(self, meta, blob, name, dtype):
        d = meta.get(name)
        if not isinstance(d, dict) or d.get("dtype") != dtype:
            raise RequestError("%s: expected an array of %s" % (name, dtype))
        off, n = d.get("off"), d.get("n")
        if not isinstance(off, int) or not isinstance(n, int) or off < 0 or n < 0 \
                or off + n * 8 > len(blob):
            raise RequestError("%s: off %r n %r outside the %d bytes sent" % (name, off, n, len(blob)))
        return self.np.frombuffer(blob, dtype="<i8", count=n, offset=off)


def serve(fd_in, fd_out):
    host = Host()
    while True:
        try:
            frame = read_frame(fd_in)
        except FrameError as e:
            send(fd_out, T_ERROR, 0, {"kind": "frame", "message": str(e)})
            return 2
        if frame is None:
            return 0
        ftype, seq, meta, blob = frame
        try:
            if isinstance(meta, RequestError):
                raise meta
            blobs = None
            if ftype == T_HELLO:
                peer = meta.get("version")
                if peer != VERSION:
                    send(fd_out, T_ERROR, seq, {"kind": "version", "message":
                         "worker speaks protocol %r, this host %d" % (peer, VERSION)})
                    return 2
                ans = host.hello(meta)
            elif ftype == T_SETUP:
                ans = host.setup(meta)
            elif ftype == T_PREFILL:
                ans, blobs = host.prefill(meta, blob)
            elif ftype == T_DECODE:
                ans, blobs = host.decode(meta)
            elif ftype == T_TOKENIZE:
                ans, blobs = host.tokenize(meta)
            elif ftype == T_SHUTDOWN:
                send(fd_out, T_SHUTDOWN | T_OK, seq, {})
                return 0
            else:
                raise RequestError("unknown request type %d" % ftype)
        except RequestError as e:
            send(fd_out, T_ERROR, seq, {"kind": "request", "message": str(e)})
            continue
        except Exception as e:  # the adapter's own failure: its traceback goes back
            tb = traceback.format_exc()
            sys.stderr.write(tb)
            sys.stderr.flush()
            send(fd_out, T_ERROR, seq, {"kind": "adapter", "message": "%s: %s" % (
                type(e).__name__, e), "traceback": tb[-4000:]})
            continue
        send(fd_out, ftype | T_OK, seq, ans, blobs)


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: air_host.py FD_IN FD_OUT\n")
        return 2
    fd_in, fd_out = int(argv[1]), int(argv[2])
    # prints of the adapter (mlir-air's drivers print progress) land on stderr
    sys.stdout = sys.stderr
    return serve(fd_in, fd_out)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
