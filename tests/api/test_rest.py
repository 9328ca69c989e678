"""The REST API without a running guest: every endpoint's wrong-state and
bad-input answers, malformed HTTP, idle clients. After each case the shim must
still answer vmm.ping."""

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from apishim import ApiShim, UnixHTTPConnection, error_message

SHIM = sys.argv[1]

ACTIONS = ["vm.boot", "vm.pause", "vm.resume", "vm.shutdown", "vm.reboot", "vm.power-button", "vm.nmi"]
GETS = ["vm.info", "vm.counters"]


class Rest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="vsnap-rest-")
        cls.kernel = os.path.join(cls.dir, "kernel")
        with open(cls.kernel, "wb") as f:
            f.write(b"this is not a kernel\n" * 100)
        cls.disk, cls.disk2 = os.path.join(cls.dir, "disk.img"), os.path.join(cls.dir, "disk2.img")
        for path in (cls.disk, cls.disk2):
            with open(path, "wb") as f:
                f.truncate(1 << 20)
        cls.shim = ApiShim(SHIM)
        cls.shim.start()

    @classmethod
    def tearDownClass(cls):
        cls.shim.kill()

    def tearDown(self):
        self.shim.alive()
        self.shim.api("PUT", "vm.delete")

    def config(self, **extra):
        cfg = {"payload": {"kernel": self.kernel}, "memory": {"size": 32 << 20}}
        cfg.update(extra)
        return cfg

    def test_ping(self):
        reply = self.shim.expect("GET", "vmm.ping", 200)
        self.assertEqual(reply["pid"], self.shim.proc.pid)
        self.assertRegex(reply["version"], r"^\d+\.\d+\.\d+$")
        self.assertIn(reply["version"], reply["build_version"])
        self.assertEqual(reply["features"], [])

    def test_no_vm_is_404(self):
        for endpoint in ACTIONS:
            with self.subTest(endpoint=endpoint):
                self.shim.expect("PUT", endpoint, 404, contains="vm.create")
        for endpoint in GETS + ["vm.wait-ready"]:
            with self.subTest(endpoint=endpoint):
                self.shim.expect("GET", endpoint, 404)
        # As Cloud Hypervisor: deleting nothing succeeds.
        self.shim.expect("PUT", "vm.delete", 204)

    def test_wrong_method_is_400(self):
        """As Cloud Hypervisor: a method the endpoint does not take is a bad request."""
        for endpoint in ACTIONS + ["vm.create", "vm.delete", "vmm.shutdown"]:
            with self.subTest(endpoint=endpoint):
                self.shim.expect("GET", endpoint, 400, contains="not allowed")
        for endpoint in GETS + ["vmm.ping"]:
            for method in ("PUT", "POST", "DELETE"):
                with self.subTest(endpoint=endpoint, method=method):
                    self.shim.expect(method, endpoint, 400, contains="not allowed")

    def test_error_body_is_a_list_of_messages(self):
        """Cloud Hypervisor answers an error with a JSON list of strings (its
        error chain); clients that print or join it must find the text there."""
        for method, endpoint, status in (("GET", "vm.nope", 404), ("PUT", "vm.boot", 404),
                                         ("GET", "vm.boot", 400)):
            with self.subTest(endpoint=endpoint, method=method):
                got, reply = self.shim.api(method, endpoint)
                self.assertEqual(got, status)
                self.assertIsInstance(reply, list)
                self.assertTrue(reply and all(isinstance(m, str) and m for m in reply), reply)
        got, reply = self.shim.api("PUT", "vm.create", raw_body="{bad json")
        self.assertEqual((got, type(reply)), (400, list), reply)

    def test_deeply_nested_json_is_refused(self):
        """100,000 nested arrays used to overflow json-glib's recursion (SIGSEGV);
        every body is bounded before it is parsed. Shallow nesting is still JSON."""
        deep = "[" * 100000 + "]" * 100000
        for endpoint in ("vm.create", "vm.snapshot", "vm.restore"):
            with self.subTest(endpoint=endpoint):
                self.shim.expect("PUT", endpoint, 400, raw_body=deep, contains="nested")
                self.shim.alive()
                self.shim.expect("PUT", endpoint, 400, raw_body='{"x": ' + deep + "}",
                                 contains="nested")
                self.shim.alive()
        shallow = self.config(extra=json.loads("[" * 100 + "]" * 100))
        self.shim.expect("PUT", "vm.create", 400, body=shallow, contains="unknown field 'extra'")

    def test_json_must_be_plain(self):
        """json-glib takes comments and single quotes, inside which brackets do not
        count; the bound refuses them rather than guess."""
        for raw in ('{"payload": {}} # [[[', "{'payload': {}}", '{"payload": /* [ */ {}}',
                    '{"payload": {"kernel": "\\q"}}'):
            with self.subTest(raw=raw):
                self.shim.expect("PUT", "vm.create", 400, raw_body=raw, contains="JSON")

    def test_unknown_endpoint_is_404(self):
        self.shim.expect("GET", "vm.nope", 404, contains="unknown endpoint")
        status, _ = self.shim.api("GET", "../../etc/passwd")
        self.assertEqual(status, 404)

    def test_create_bad_input(self):
        big = 1 << 40
        cases = [
            (None, "", "VmConfig"),
            (None, "{bad json", "not valid JSON"),
            (None, "[]", "JSON object"),
            (None, "null", "JSON object"),
            ({}, None, "'payload'"),
            ({"payload": {}}, None, "'payload.kernel'"),
            (self.config(memory={"size": 0}), None, "'memory.size'"),
            (self.config(memory={"size": big}), None, "'memory.size'"),
            (self.config(memory={"size": 2**64 + 1}), None, "'memory.size'"),
            (self.config(memory={"size": (64 << 20) + 1}), None, "4 KiB"),
            (self.config(memory={"size": "512M"}), None, "'memory.size'"),
            (self.config(memory={"sise": 1}), None, "unknown field 'memory.sise'"),
            (self.config(cpus={"boot_vcpus": 0}), None, "'cpus.boot_vcpus'"),
            (self.config(cpus={"boot_vcpus": 1000}), None, "'cpus.boot_vcpus'"),
            (self.config(cpus={"boot_vcpus": True}), None, "'cpus.boot_vcpus'"),
            (self.config(serial={"mode": "Bogus"}), None, "'serial.mode'"),
            (self.config(vsock={"cid": 1, "socket": "/tmp/x"}), None, "'vsock.cid'"),
            (self.config(extra_field=1), None, "unknown field 'extra_field'"),
            (self.config(disks=[{"path": os.path.join(self.dir, "no-disk")}]), None,
             "'disks[0].path': " + os.path.join(self.dir, "no-disk") + ": No such file"),
            (self.config(disks=[{"path": self.dir}]), None, "not a regular file or a block device"),
            (self.config(disks=[{"path": self.disk, "image_type": "Qcow2"}]), None,
             "'disks[0].image_type': 'Qcow2' is not supported"),
            (self.config(disks=[{"path": self.disk, "vhost_user": True}]), None,
             "'disks[0].vhost_user' is not supported"),
            (self.config(net=[{"tap": "tap0", "vhost_user": True}]), None, "'net[0].vhost_user' is not supported"),
            ({"payload": {"kernel": os.path.join(self.dir, "missing")}}, None, "No such file"),
            ({"payload": {"kernel": self.dir}}, None, "not a regular file"),
        ]
        for body, raw, needle in cases:
            with self.subTest(body=body, raw=raw):
                self.shim.expect("PUT", "vm.create", 400, body=body, raw_body=raw, contains=needle)
                self.shim.alive()
                self.shim.expect("GET", "vm.info", 404)

    def test_oversized_body_is_413(self):
        self.shim.expect("PUT", "vm.create", 413, raw_body=" " * (2 << 20))

    def test_created_state(self):
        cfg = self.config(cpus={"boot_vcpus": 2}, serial={"mode": "Off"})
        self.shim.expect("PUT", "vm.create", 204, body=cfg)
        # As Cloud Hypervisor: its code answers a second vm.create with 500
        # (VmAlreadyCreated is an internal error there; its openapi lists nothing).
        self.shim.expect("PUT", "vm.create", 500, body=cfg, contains="already created")
        info = self.shim.expect("GET", "vm.info", 200)
        self.assertEqual(info["state"], "Created")
        self.assertEqual(info["config"]["payload"]["kernel"], self.kernel)
        self.assertEqual(info["config"]["cpus"], {"boot_vcpus": 2, "max_vcpus": 2})
        self.assertEqual(info["config"]["memory"]["size"], 32 << 20)
        self.assertEqual(info["config"]["serial"]["mode"], "Off")
        self.assertEqual(info["memory_actual_size"], 32 << 20)
        self.assertEqual(info["device_tree"], {})
        self.assertIsNone(info["vsnap"]["last_stop_reason"])
        for endpoint in ACTIONS[1:]:
            with self.subTest(endpoint=endpoint):
                self.shim.expect("PUT", endpoint, 405, contains="Created")
        self.shim.expect("GET", "vm.counters", 405)
        self.shim.expect("GET", "vm.wait-ready", 405)
        self.shim.expect("PUT", "vm.boot", 400, raw_body="{}", contains="no request body")
        self.shim.expect("PUT", "vm.delete", 204)
        self.shim.expect("GET", "vm.info", 404)

    def test_disks_while_not_running(self):
        """vm.add-disk / vm.remove-device change the config of a VM that is not
        running (Cloud Hypervisor's cold add, 204); without a VM they are 404."""
        self.shim.expect("PUT", "vm.add-disk", 404, body={"path": self.disk})
        self.shim.expect("PUT", "vm.remove-device", 404, body={"id": "_disk0"})
        self.shim.expect("PUT", "vm.create", 204, body=self.config(disks=[{"path": self.disk, "id": "root"}]))
        # One image is one disk's while a disk writes it (a second disk on it would read what the first writes).
        self.shim.expect("PUT", "vm.add-disk", 400, body={"path": self.disk, "readonly": True},
                         contains="is the image of disks[0] too")
        self.shim.expect("PUT", "vm.add-disk", 204, body={"path": self.disk2, "readonly": True})
        self.shim.expect("PUT", "vm.add-disk", 409, body={"path": self.disk, "id": "root"}, contains="root")
        self.shim.expect("PUT", "vm.add-disk", 400, body={"path": os.path.join(self.dir, "none")},
                         contains="'disks[2].path'")
        self.shim.expect("PUT", "vm.add-disk", 400, body={"path": self.disk, "image_type": "Vhdx"},
                         contains="'Vhdx'")
        self.shim.expect("PUT", "vm.add-disk", 400, body={"path": self.disk, "nope": 1}, contains="'nope'")
        self.shim.expect("PUT", "vm.add-disk", 400, contains="needs a body")
        disks = self.shim.expect("GET", "vm.info", 200)["config"]["disks"]
        self.assertEqual([(d["id"], d["readonly"]) for d in disks], [("root", False), ("_disk0", True)])
        self.assertEqual(disks[1]["image_type"], "Raw")
        self.shim.expect("PUT", "vm.remove-device", 404, body={"id": "nothing"}, contains="nothing")
        self.shim.expect("PUT", "vm.remove-device", 400, body={"id": 3})
        self.shim.expect("PUT", "vm.remove-device", 400, raw_body="{bad")
        self.shim.expect("PUT", "vm.remove-device", 204, body={"id": "root"})
        disks = self.shim.expect("GET", "vm.info", 200)["config"]["disks"]
        self.assertEqual([d["id"] for d in disks], ["_disk0"])
        self.shim.expect("PUT", "vm.remove-device", 204, body={"id": "_disk0"})
        self.assertIsNone(self.shim.expect("GET", "vm.info", 200)["config"]["disks"])

    def test_boot_of_a_non_kernel_is_500(self):
        self.shim.expect("PUT", "vm.create", 204, body=self.config())
        reply = self.shim.expect("PUT", "vm.boot", 500)
        self.assertIn(self.kernel, error_message(reply))
        info = self.shim.expect("GET", "vm.info", 200)
        self.assertEqual(info["state"], "Created")
        self.assertIn(self.kernel, info["vsnap"]["last_error"])

    def test_bad_wait_ready_query(self):
        self.shim.expect("GET", "vm.wait-ready", 400, query="?timeout_ms=soon",
                         contains="timeout_ms")

    def test_malformed_http(self):
        requests = [
            b"GARBAGE\r\n\r\n",
            b"\x00\x01\x02\xff\xfe\r\n\r\n",
            b"GET /api/v1/vmm.ping HTTP/9.9\r\n\r\n",
            b"GET /api/v1/vmm.ping HTTP/1.1\r\nno colon here\r\n\r\n",
            b"GET /api/v1/vmm.ping HTTP/1.1\r\nX-Long: " + b"a" * 200000 + b"\r\n\r\n",
            b"PUT /api/v1/vm.create HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"pay",
            b"PUT /api/v1/vm.create HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
            b"PUT /api/v1/vm.create HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"GET " + b"/" * 100000 + b" HTTP/1.1\r\n\r\n",
            b"\r\n" * 1000,
            b"GET /api/v1/vmm.ping",
        ]
        for data in requests:
            with self.subTest(data=data[:40]):
                reply = self.shim.raw(data)
                if reply:
                    self.assertRegex(reply, rb"^HTTP/1\.[01] [45]\d\d ")
                self.shim.alive()

    def test_raw_valid_request(self):
        reply = self.shim.raw(b"GET /api/v1/vmm.ping HTTP/1.1\r\nHost: localhost\r\n"
                              b"Connection: close\r\n\r\n")
        self.assertRegex(reply, rb"^HTTP/1\.1 200 ")
        self.assertIn(b'"pid":%d' % self.shim.proc.pid, reply)

    def test_idle_clients_do_not_block_others(self):
        idle = []
        for _ in range(5):
            s = socket.socket(socket.AF_UNIX)
            s.connect(self.shim.socket_path)
            idle.append(s)
        half = socket.socket(socket.AF_UNIX)
        half.connect(self.shim.socket_path)
        half.sendall(b"PUT /api/v1/vm.create HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{")
        idle.append(half)
        try:
            for _ in range(10):
                start = time.monotonic()
                self.shim.alive()
                self.assertLess(time.monotonic() - start, 1.0)
        finally:
            for s in idle:
                s.close()

    def test_concurrent_clients(self):
        errors = []

        def hammer():
            try:
                for _ in range(10):
                    self.shim.alive()
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=hammer) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])

    def exchanges(self):
        """(method, endpoint, request body, expected status): requests with
        and without a body, answers with and without one."""
        create = json.dumps(self.config())
        return [("GET", "vmm.ping", None, 200),
                ("PUT", "vm.create", create, 204),
                ("GET", "vm.info", None, 200),
                ("PUT", "vm.create", '{"payload": ', 400),
                ("PUT", "vm.delete", None, 204)]

    def test_100_requests_on_one_connection(self):
        """HTTP/1.1 connections persist: Python's http.client sends 100
        requests on one connection (it would open another only if the shim
        said Connection: close)."""
        conn = UnixHTTPConnection(self.shim.socket_path)
        try:
            exchanges = self.exchanges()
            first = None
            for i in range(100):
                method, endpoint, body, status = exchanges[i % len(exchanges)]
                headers = {"Content-Type": "application/json"} if body else {}
                conn.request(method, f"/api/v1/{endpoint}", body=body, headers=headers)
                reply = conn.getresponse()
                data = reply.read()
                self.assertEqual(reply.status, status, f"request {i}: {method} {endpoint}: {data}")
                self.assertNotEqual((reply.getheader("Connection") or "").lower(), "close",
                                    f"request {i}")
                if reply.status not in (200, 400, 404) or not data:
                    self.assertEqual(data, b"")
                else:
                    json.loads(data)
                first = first or conn.sock
                self.assertIs(conn.sock, first, f"request {i} went on a new connection")
        finally:
            conn.close()

    def test_connection_close_is_honoured(self):
        conn = UnixHTTPConnection(self.shim.socket_path)
        try:
            conn.request("GET", "/api/v1/vmm.ping", headers={"Connection": "close"})
            reply = conn.getresponse()
            reply.read()
            self.assertEqual(reply.status, 200)
            self.assertEqual(reply.getheader("Connection"), "close")
        finally:
            conn.close()

    def test_pipelined_requests(self):
        one = b"GET /api/v1/vmm.ping HTTP/1.1\r\nHost: localhost\r\n\r\n"
        last = b"GET /api/v1/vmm.ping HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        reply = self.shim.raw(one * 9 + last, timeout=10, shut_write=False)
        self.assertEqual(reply.count(b"HTTP/1.1 200 "), 10, reply[:2000])

    def test_100_requests_on_one_libcurl_connection(self):
        """libcurl reuses its connection for one handle's transfers (curl's
        tool shares it across URLs and --next): 100 transfers, one connect."""
        body_path = os.path.join(self.dir, "create.json")
        with open(body_path, "w") as f:
            json.dump(self.config(), f)
        url = "http://localhost/api/v1/"
        argv = ["curl", "-sS", "--max-time", "60"]
        per = ["--unix-socket", self.shim.socket_path, "-o", "/dev/null",
               "-w", "%{num_connects} %{http_code}\n"]
        for i in range(50):
            if i:
                argv.append("--next")
            argv += per + [url + "vmm.ping", "--next"] + per
            argv += ["-X", "PUT", "-H", "Content-Type: application/json",
                     "--data-binary", "@" + body_path if i % 2 == 0 else '{"bad',
                     url + "vm.create"]
            argv += ["--next"] + per + ["-X", "PUT", url + "vm.delete"] if i % 2 == 0 else []
        res = subprocess.run(argv, capture_output=True, text=True, timeout=90)
        self.assertEqual(res.returncode, 0, res.stderr)
        lines = [line.split() for line in res.stdout.splitlines()]
        self.assertGreaterEqual(len(lines), 100)
        codes = {code for _, code in lines}
        self.assertEqual(codes, {"200", "204", "400"}, res.stdout)
        self.assertEqual(sum(int(n) for n, _ in lines), 1, f"connects per transfer: {res.stdout}")

    def test_vmm_shutdown_exits_after_replying(self):
        other = ApiShim(SHIM)
        other.start()
        try:
            other.expect("PUT", "vm.create", 204, body=self.config())
            other.expect("PUT", "vmm.shutdown", 204)
            self.assertEqual(other.proc.wait(timeout=10), 0)
            self.assertFalse(os.path.exists(other.socket_path))
        finally:
            other.kill()


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
