"""A hostile snapshot store of the tests' own (test_hostile.py): Python's
http.server on 127.0.0.1 serving a directory tree as http:// stores, one per
top-level folder, with what a store that lies does:

- /<name>/...        the files under <root>/<name>/, with HEAD and single
                     Range GETs, keep-alive (HTTP/1.1)
- /trickle-<name>/   the same, but an object's body goes out at 1 byte a
                     second (its manifests at full speed)
- /endless/          every manifest asked for exists, naming a parent no
                     one asked for yet: a chain that never ends

And what the hostile objects are made of: zstd frames (the zstd program's,
checksummed, or hand-made RLE blocks that claim any size from a few bytes),
seek tables and manifests as vsnap-store writes them, the layer header's
offsets and CRC-32C (to patch a layer's id and keep its header valid).

Python 3 stdlib and the zstd program only."""

import hashlib
import http.server
import json
import os
import re
import socket
import struct
import subprocess
import tempfile
import threading
import time
import uuid

SKIPPABLE_MAGIC = 0x184D2A5E
SEEKABLE_MAGIC = 0x8F92EAB1
ZSTD_MAGIC = 0xFD2FB528
RLE_BLOCK_MAX = 128 << 10

# struct snap_layer_header (common/snapshot/layer.h)
LAYER_ID_OFFSET = 32
LAYER_HEADER_SIZE = 136
LAYER_HEADER_CRC_OFFSET = 128


def _crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC32C = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = CRC32C[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def patch_layer_id(layer, new_id):
    """The layer's bytes with its header's id replaced and the header's
    CRC-32C made right again (what an attacker does to pass a layer off as
    another snapshot's)."""
    b = bytearray(layer)
    b[LAYER_ID_OFFSET:LAYER_ID_OFFSET + 16] = uuid.UUID(new_id).bytes
    header = bytearray(b[:LAYER_HEADER_SIZE])
    header[LAYER_HEADER_CRC_OFFSET:LAYER_HEADER_CRC_OFFSET + 4] = b"\0\0\0\0"
    b[LAYER_HEADER_CRC_OFFSET:LAYER_HEADER_CRC_OFFSET + 4] = struct.pack("<I", crc32c(header))
    return bytes(b)


def zstd_frame(data):
    """One zstd frame with its content size and checksum (the zstd program's;
    from a file: from a pipe it does not know the size to write)."""
    with tempfile.NamedTemporaryFile() as f:
        f.write(data)
        f.flush()
        r = subprocess.run(["zstd", "-q", "-c", "-3", "--content-size", "--check", f.name],
                           capture_output=True, check=True, timeout=60)
    return r.stdout


def rle_frame(size, byte=0x41):
    """A frame claiming size bytes of one byte, in 4 bytes per 128 KiB
    (RLE blocks, no checksum): a decompression bomb."""
    out = bytearray(struct.pack("<IB", ZSTD_MAGIC, 0xE0) + struct.pack("<Q", size))
    left = size
    while left:
        n = min(left, RLE_BLOCK_MAX)
        left -= n
        header = (1 if not left else 0) | (1 << 1) | (n << 3)   # last, RLE, size
        out += struct.pack("<I", header)[:3] + bytes([byte])
    return bytes(out)


def frame_checksum(frame):
    """What a seek table entry holds for the frame: its last 4 bytes."""
    return struct.unpack("<I", frame[-4:])[0]


def seekable(frames_and_sizes):
    """An object: the frames, then the seek table. frames_and_sizes: (frame,
    decompressed size) pairs. Returns (object bytes, table bytes)."""
    body = b"".join(f for f, _ in frames_and_sizes)
    entries = b"".join(struct.pack("<III", len(f), n, frame_checksum(f)) for f, n in frames_and_sizes)
    table = (struct.pack("<II", SKIPPABLE_MAGIC, len(entries) + 9) + entries +
             struct.pack("<IBI", len(frames_and_sizes), 0x80, SEEKABLE_MAGIC))
    return body + table, table


def seekable_of(data, frame_size=1 << 20):
    """data as an object vsnap-store could have written."""
    frames = [(zstd_frame(data[i:i + frame_size]), len(data[i:i + frame_size]))
              for i in range(0, len(data), frame_size)]
    return seekable(frames)


def file_entry(name, kind, size, digest, obj, table):
    return {"name": name, "kind": kind, "size": size, "sha256": digest, "object_size": len(obj),
            "frames": struct.unpack("<I", table[-9:-5])[0],
            "seek_table_sha256": hashlib.sha256(table).hexdigest()}


def manifest(sid, files, parent=None, disk_parents=None):
    m = {"vsnap_manifest_version": 1, "id": sid, "created": "2026-12-01T00:00:00Z", "files": files}
    if parent:
        m["parent"] = parent
    if disk_parents:
        m["disk_parents"] = disk_parents
    return m


class Store:
    """One store's tree under the server's root: <root>/<name>/."""

    def __init__(self, server, name):
        self.server, self.name = server, name
        self.dir = os.path.join(server.root, name)
        os.makedirs(os.path.join(self.dir, "objects"), exist_ok=True)
        os.makedirs(os.path.join(self.dir, "manifests"), exist_ok=True)

    def url(self, trickle=False):
        return f"http://127.0.0.1:{self.server.port}/{'trickle-' if trickle else ''}{self.name}"

    def put_object(self, digest, obj):
        with open(os.path.join(self.dir, "objects", f"{digest}.zst"), "wb") as f:
            f.write(obj)

    def put_manifest(self, m):
        with open(os.path.join(self.dir, "manifests", f"{m['id']}.json"), "w") as f:
            json.dump(m, f)

    def manifest(self, sid):
        with open(os.path.join(self.dir, "manifests", f"{sid}.json")) as f:
            return json.load(f)


RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        # headers and body go out in separate writes: without this, Nagle and
        # the client's delayed ACK cost 40 ms a request (the endless chain's
        # 4096 manifests took minutes)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, fmt, *args):
        self.server.owner.log.append(f"{self.command} {self.path}")

    def do_HEAD(self):
        self.answer(body=False)

    def do_GET(self):
        self.answer(body=True)

    def answer(self, body):
        parts = self.path.split("/", 2)
        top, rest = parts[1], parts[2] if len(parts) > 2 else ""
        if top == "endless" and rest.startswith("manifests/"):
            return self.send_bytes(self.invented_manifest(rest), body)
        trickle = top.startswith("trickle-")
        path = os.path.join(self.server.owner.root, top[len("trickle-"):] if trickle else top, rest)
        if ".." in self.path or not os.path.isfile(path):
            return self.send_bytes(b"no such object\n", body, status=404)
        with open(path, "rb") as f:
            data = f.read()
        self.send_bytes(data, body, trickle=trickle and rest.startswith("objects/"))

    def invented_manifest(self, rest):
        sid = os.path.basename(rest)[:-len(".json")]
        return json.dumps(manifest(sid, [], parent=str(uuid.uuid4()))).encode()

    def send_bytes(self, data, body, status=200, trickle=False):
        start, end = 0, len(data)
        m = RANGE.match(self.headers.get("Range", ""))
        if m and status == 200:
            start = int(m.group(1))
            end = min(len(data), int(m.group(2)) + 1 if m.group(2) else len(data))
            status = 206
        self.send_response(status)
        self.send_header("Content-Length", str(end - start))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
        self.end_headers()
        if not body:
            return
        try:
            if not trickle:
                self.wfile.write(data[start:end])
                return
            for i in range(start, end):   # 1 byte a second, until the client gives up
                self.wfile.write(data[i:i + 1])
                self.wfile.flush()
                time.sleep(1)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


class HostileServer:
    """The server, on a free port of 127.0.0.1, in a thread of this process."""

    def __init__(self, root):
        self.root = root
        self.log = []
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.owner = self
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def store(self, name):
        return Store(self, name)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
