"""The real servers the store tests run against, on loopback in private
directories, started once per test run (test_store.py):

- Nginx: nginx serving <dir>/www with WebDAV PUT and directory listings under
  /store/, the same tree under /rate-<N>k/ with limit_rate N KiB/s per
  connection, the same tree under /idle-1s/ closing keep-alive connections
  idle for 1 s, /e403/ and /e500/ answering those codes; an access log of
  method, path, status, body bytes, range and the connection's serial
  number (one per TCP connection nginx accepted). A second server block,
  on its own port, speaks TLS with a certificate of a throwaway CA (Tls)
  for 127.0.0.1 and localhost: the same /store/ tree, and the bucket
  vsnap-test relayed to the RADOS Gateway (S3 over TLS); its own access
  log adds whether each connection resumed a TLS session. It listens on
  127.0.0.2 too, a name its certificate does not cover.
- Tls: that CA and certificate, made with openssl in the test's directory.
- Rgw: Ceph's RADOS Gateway on a one-node cluster (one monitor, one memstore
  OSD, no manager) as the S3 endpoint, with a user whose keys it returns.

- ConnectionCounter: a TCP relay to another server (the RADOS Gateway,
  whose log does not say which connection a request came on) that counts
  the connections it accepts.

- StallingProxy: a stalled store: in front of nginx, it relays requests for
  manifests and listings but accepts those for objects (*.zst, any method)
  and never answers them, as a server that hangs mid-import does.

Python 3 stdlib only. Every process is stopped by its pid."""

import http.server
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid


class ServerError(Exception):
    pass


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, timeout_s, proc=None, what="server"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if proc is not None and proc.poll() is not None:
                raise ServerError(f"{what} exited with {proc.returncode}")
            time.sleep(0.05)
    raise ServerError(f"{what}: nothing listens on port {port} after {timeout_s} s")


def stop(proc, timeout_s=10):
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout_s)


# A location that is a store: ranged GET, WebDAV PUT and DELETE, listings.
WEBDAV = "dav_methods PUT DELETE; create_full_put_path on; dav_access user:rw group:r all:r; autoindex on;"

NGINX_CONF = """
daemon off;
master_process off;
worker_processes 1;
user root root;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 512; }}
http {{
    log_format store '$request_method $uri $status $body_bytes_sent "$http_range" $connection';
    log_format tls '$request_method $uri $status $body_bytes_sent "$http_range" $connection '
                   '$ssl_session_reused $ssl_protocol $server_protocol $connection_requests $msec '
                   '$connection_time $remote_port';
    access_log {d}/access.log store;
    client_body_temp_path {d}/tmp/body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
    client_max_body_size 0;
    sendfile on;
    server {{
        listen 127.0.0.1:{port};
        root {d}/www;
        location /store/ {{
            {webdav}
        }}
        location ~ ^/rate-(?<rate>\\d+)k/(?<rest>.*)$ {{
            alias {d}/www/store/$rest;
            limit_rate ${{rate}}k;
            autoindex on;
        }}
        location /idle-1s/ {{
            alias {d}/www/store/;
            keepalive_timeout 1s;
            {webdav}
        }}
        location /e403/ {{ return 403; }}
        location /e500/ {{ return 500; }}
    }}
    server {{
        # http2 offered, as many TLS servers do: a store client keeps to
        # HTTP/1.1 (its ranges on connections of their own)
        listen 127.0.0.1:{tls_port} ssl http2;
        listen 127.0.0.2:{tls_port} ssl http2;   # an address the certificate does not name
        ssl_certificate {tls}/server.pem;
        ssl_certificate_key {tls}/server.key;
        # nginx 1.22's default is TLS 1 to 1.2; a store client meets 1.3
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_cache shared:vsnap_tls:1m;
        access_log {d}/tls-access.log tls;
        root {d}/www;
        location /store/ {{
            {webdav}
        }}
        # S3 over TLS: the path unchanged (path-style: /bucket/key) and the
        # client's Host header, which its SigV4 signature covers; bodies
        # streamed both ways, not spooled to a file first
        location /vsnap-test {{
            proxy_pass http://127.0.0.1:{rgw_port};
            proxy_set_header Host $http_host;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_request_buffering off;
            proxy_buffering off;
        }}
    }}
}}
"""


class Tls:
    """<dir>/ca.pem, a throwaway CA (no system trusts it), and
    server.pem/server.key, a certificate it signed for 127.0.0.1 (an IP
    SAN) and localhost."""

    def __init__(self, dir):
        self.dir = dir
        os.makedirs(dir, exist_ok=True)
        self.ca = os.path.join(dir, "ca.pem")
        ext = os.path.join(dir, "server.ext")
        with open(ext, "w") as f:
            f.write("subjectAltName = IP:127.0.0.1, DNS:localhost\nbasicConstraints = CA:FALSE\n"
                    "keyUsage = critical, digitalSignature\nextendedKeyUsage = serverAuth\n")
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        self._openssl("req", "-x509", *ec, "-keyout", os.path.join(dir, "ca.key"), "-out", self.ca,
                      "-days", "2", "-subj", "/CN=vsnap test CA",
                      "-addext", "basicConstraints = critical, CA:TRUE",
                      "-addext", "keyUsage = critical, keyCertSign, cRLSign")
        self._openssl("req", *ec, "-keyout", os.path.join(dir, "server.key"),
                      "-out", os.path.join(dir, "server.csr"), "-subj", "/CN=127.0.0.1")
        self._openssl("x509", "-req", "-in", os.path.join(dir, "server.csr"), "-CA", self.ca,
                      "-CAkey", os.path.join(dir, "ca.key"), "-CAcreateserial", "-days", "2",
                      "-extfile", ext, "-out", os.path.join(dir, "server.pem"))

    @staticmethod
    def _openssl(*args):
        try:
            r = subprocess.run(["openssl"] + list(args), capture_output=True, text=True, timeout=30)
        except subprocess.TimeoutExpired:
            raise ServerError(f"openssl {args[0]}: no answer in 30 s") from None
        if r.returncode != 0:
            raise ServerError(f"openssl {' '.join(args)} -> {r.returncode}: {r.stderr[-2000:]}")


class Nginx:
    """rgw_port: where the TLS server relays the bucket vsnap-test (the
    RADOS Gateway's port, chosen before either starts); None: a port
    nothing listens on."""

    def __init__(self, workdir, rgw_port=None):
        self.dir = os.path.join(workdir, "nginx")
        for sub in ("www/store", "tmp"):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        self.tls = Tls(os.path.join(self.dir, "tls"))
        self.port, self.tls_port = free_port(), free_port()
        self.conf = os.path.join(self.dir, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(NGINX_CONF.format(webdav=WEBDAV, d=self.dir, port=self.port, tls_port=self.tls_port,
                                      tls=self.tls.dir, rgw_port=rgw_port or free_port()))
        self.proc = None
        self.start()

    def start(self):
        self.log = open(os.path.join(self.dir, "stderr.log"), "ab")
        self.proc = subprocess.Popen(["nginx", "-c", self.conf, "-p", self.dir],
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        wait_port(self.port, 10, self.proc, "nginx")
        wait_port(self.tls_port, 10, self.proc, "nginx (TLS)")

    def kill(self):
        """Gone at once, connections dropped mid-transfer."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def close(self):
        stop(self.proc)

    @property
    def root(self):
        """The directory /store/ serves: also a file:// store."""
        return os.path.join(self.dir, "www", "store")

    def url(self, prefix="store", sub=""):
        return f"http://127.0.0.1:{self.port}/{prefix}" + (f"/{sub}" if sub else "")

    def tls_url(self, prefix="store", sub="", host="127.0.0.1"):
        return f"https://{host}:{self.tls_port}/{prefix}" + (f"/{sub}" if sub else "")

    @property
    def tls_endpoint(self):
        """The RADOS Gateway through TLS (the bucket vsnap-test only)."""
        return f"https://127.0.0.1:{self.tls_port}"

    def access_lines(self):
        """[method, path, status, bytes, "range", connection] per request."""
        return self._lines("access.log", 1)

    def tls_access_lines(self):
        """The TLS server's: [method, path, status, bytes, "range",
        connection, session ("r": resumed, "." a full handshake),
        TLS protocol, HTTP protocol, the request's number on its
        connection (1: the first), when it was logged, how long its
        connection had been open then (both in seconds), the client's
        port] per request."""
        return self._lines("tls-access.log", 8)

    def _lines(self, name, tail):
        path = os.path.join(self.dir, name)
        if not os.path.exists(path):
            return []
        with open(path) as f:
            lines = f.read().splitlines()
        out = []
        for line in lines:
            parts = line.rsplit(" ", tail)
            out.append(parts[0].split(" ", 4) + parts[1:])
        return out


class ConnectionCounter:
    """127.0.0.1:<port> relays every TCP connection to upstream_port;
    accepted counts them."""

    def __init__(self, upstream_port):
        self.upstream_port = upstream_port
        self.accepted = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @staticmethod
    def _pump(src, dst):
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            src.close()   # the other pump closes dst, its own src

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            self._relaying(client, upstream)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _relaying(self, client, upstream):
        """A connection is about to be relayed (nothing read from it yet)."""

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def close(self):
        self.closed = True
        self.sock.close()


def offers_a_session(hello):
    """True if a TLS ClientHello record offers a session to resume (a
    pre_shared_key extension, RFC 8446 4.2.11), None if it is not one."""
    try:
        if hello[0] != 22 or hello[5] != 1:
            return None
        p = 5 + 4 + 2 + 32                             # headers, version, random
        p += 1 + hello[p]                              # session id
        p += 2 + struct.unpack(">H", hello[p:p + 2])[0]  # cipher suites
        p += 1 + hello[p]                              # compression methods
        end = p + 2 + struct.unpack(">H", hello[p:p + 2])[0]
        p += 2
        while p + 4 <= end:
            kind, size = struct.unpack(">HH", hello[p:p + 4])
            if kind == 41:
                return True
            p += 4 + size
        return False
    except (IndexError, struct.error):
        return None


class TlsHelloRelay(ConnectionCounter):
    """A ConnectionCounter that reads each client's TLS ClientHello on its
    way (it is sent in the clear): offered[port] says whether it offered a
    session to resume, port being the relay's own towards the server
    (nginx's $remote_port). Whether a client offers a session is its own
    choice; whether a server takes an offered one is what the server log
    shows."""

    def __init__(self, upstream_port):
        self.offered = {}
        super().__init__(upstream_port)

    def _relaying(self, client, upstream):
        client.settimeout(10)
        hello = b""
        try:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                hello = client.recv(1 << 16, socket.MSG_PEEK)
                if not hello or (len(hello) >= 5 and len(hello) >= 5 + struct.unpack(">H", hello[3:5])[0]):
                    break
                time.sleep(0.001)
        except OSError:
            pass
        client.settimeout(None)
        self.offered[upstream.getsockname()[1]] = offers_a_session(hello)

    @property
    def tls_endpoint(self):
        return f"https://127.0.0.1:{self.port}"


class StallingProxy:
    """http://127.0.0.1:<port>/<path> relays to nginx's /<path>, except
    objects, whose requests stay unanswered until close()."""

    def __init__(self, nginx):
        released = self.released = threading.Event()
        upstream = f"http://127.0.0.1:{nginx.port}"
        self.stalled = 0

        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def stall(self):
                proxy.stalled += 1
                released.wait(300)
                self.close_connection = True

            def relay(self, head):
                if self.path.endswith(".zst"):
                    return self.stall()
                req = urllib.request.Request(upstream + self.path, method="HEAD" if head else "GET")
                if self.headers.get("Range"):
                    req.add_header("Range", self.headers["Range"])
                try:
                    with urllib.request.urlopen(req, timeout=30) as r:
                        status, body, headers = r.status, r.read(), r.headers
                except urllib.error.HTTPError as e:
                    status, body, headers = e.code, e.read(), e.headers
                self.send_response(status)
                for name in ("Content-Type", "Content-Range"):
                    if headers.get(name):
                        self.send_header(name, headers[name])
                self.send_header("Content-Length", headers.get("Content-Length", str(len(body))) if head
                                 else str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def do_GET(self):
                self.relay(False)

            def do_HEAD(self):
                self.relay(True)

            def do_PUT(self):
                self.stall()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, prefix="store", sub=""):
        return f"http://127.0.0.1:{self.port}/{prefix}" + (f"/{sub}" if sub else "")

    def close(self):
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


CEPH_CONF = """
[global]
fsid = {fsid}
mon host = 127.0.0.1:{mon_port}
auth cluster required = none
auth service required = none
auth client required = none
ms mon client mode = crc
ms client mode = crc
osd pool default size = 1
osd pool default min size = 1
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
run dir = {d}/run
log file = {d}/log/$name.log
admin socket = {d}/run/$name.asok
mon data = {d}/mon/$cluster-$id
osd data = {d}/osd/$cluster-$id
osd objectstore = memstore
memstore device bytes = {osd_bytes}
keyring = {d}/keyring
[client.rgw.a]
rgw frontends = beast endpoint=127.0.0.1:{rgw_port}
rgw data = {d}/rgw
"""


class Rgw:
    """A one-node Ceph cluster and its RADOS Gateway (about 15 s to start)."""

    def __init__(self, workdir, osd_bytes=2 << 30, port=None):
        self.dir = os.path.join(workdir, "ceph")
        for sub in ("run", "log", "mon", "osd/ceph-0", "rgw"):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        self.mon_port, self.port = free_port(), port or free_port()
        self.fsid = str(uuid.uuid4())
        self.conf = os.path.join(self.dir, "ceph.conf")
        with open(self.conf, "w") as f:
            f.write(CEPH_CONF.format(d=self.dir, fsid=self.fsid, mon_port=self.mon_port,
                                     rgw_port=self.port, osd_bytes=osd_bytes))
        self.procs = []
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def _run(self, *args, timeout=60):
        try:
            r = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ServerError(f"{' '.join(args)}: no answer in {timeout} s") from None
        if r.returncode != 0:
            raise ServerError(f"{' '.join(args)} -> {r.returncode}: {r.stderr[-2000:]}")
        return r.stdout

    def _daemon(self, *args):
        log = open(os.path.join(self.dir, "log", f"{args[0]}.stderr"), "ab")
        proc = subprocess.Popen(list(args) + ["-c", self.conf, "-f"], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log)
        self.procs.append(proc)
        return proc

    def _start(self):
        c = self.conf
        monmap = os.path.join(self.dir, "monmap")
        self._run("monmaptool", "--create", "--add", "a", f"127.0.0.1:{self.mon_port}",
                  "--fsid", self.fsid, monmap)
        self._run("ceph-mon", "-c", c, "--mkfs", "-i", "a", "--monmap", monmap)
        self._daemon("ceph-mon", "-i", "a")
        wait_port(self.mon_port, 30, self.procs[-1], "ceph-mon")
        osd = self._run("ceph", "-c", c, "--connect-timeout", "30", "osd", "create").strip()
        self._run("ceph-osd", "-c", c, "-i", osd, "--mkfs")
        self._run("ceph", "-c", c, "--connect-timeout", "30", "osd", "crush", "add", f"osd.{osd}",
                  "1.0", "host=localhost")
        self._daemon("ceph-osd", "-i", osd)
        self._daemon("radosgw", "-n", "client.rgw.a")
        wait_port(self.port, 120, self.procs[-1], "radosgw")
        user = json.loads(self._run("radosgw-admin", "-c", c, "user", "create", "--uid=vsnap",
                                    "--display-name=vsnap", timeout=120))
        self.access_key = user["keys"][0]["access_key"]
        self.secret_key = user["keys"][0]["secret_key"]

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def env(self):
        """The AWS_* variables that point a client at this gateway."""
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_REGION": "default", "AWS_ENDPOINT_URL": self.endpoint}

    def close(self):
        for proc in reversed(self.procs):
            stop(proc)
        self.procs = []


def remove(path):
    shutil.rmtree(path, ignore_errors=True)


__all__ = ["ConnectionCounter", "Nginx", "Rgw", "ServerError", "StallingProxy", "Tls", "free_port", "remove", "signal"]
