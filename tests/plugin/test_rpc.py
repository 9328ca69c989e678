"""The RPC layer itself, through a raw client: framing, keepalive, errors,
access control. No VM is started."""

import struct
import time
import unittest

import libvirt

from vsnapd import (CALL, KEEPALIVE_PROGRAM, MESSAGE, REMOTE_PROGRAM, DaemonTest, RawClient,
                    decode_error, domain_xml, xdr_string)


class RpcTest(DaemonTest):
    def test_auth_list_is_none(self):
        c = RawClient(self.daemon.sock)
        status, body = c.call(66)
        self.assertEqual(status, 0)
        self.assertEqual(struct.unpack(">II", body), (1, 0))   # one entry: REMOTE_AUTH_NONE

    def test_keepalive_ping_gets_pong(self):
        c = RawClient(self.daemon.sock)
        c.open()
        c.send_packet(KEEPALIVE_PROGRAM, 1, 1, MESSAGE, 0, 0)
        hdr, body = c.recv_packet()
        self.assertEqual(hdr[:4], (KEEPALIVE_PROGRAM, 1, 2, MESSAGE))
        self.assertEqual(body, b"")

    def test_unknown_procedure_is_no_support_quickly(self):
        c = RawClient(self.daemon.sock, timeout=5)
        c.open()
        start = time.monotonic()
        for proc in (62, 999, 4000):   # MIGRATE_PERFORM (known, not served), unknown, huge
            status, body = c.call(proc)
            self.assertEqual(status, 1)
            code, domain, message = decode_error(body)
            self.assertEqual(code, libvirt.VIR_ERR_NO_SUPPORT)
            self.assertIn(str(proc), message)
        self.assertLess(time.monotonic() - start, 2)
        status, body = c.call(3)   # the connection still works: GET_TYPE
        self.assertEqual(status, 0)

    def test_call_before_open_is_refused(self):
        c = RawClient(self.daemon.sock)
        status, body = c.call(3)
        self.assertEqual(status, 1)
        self.assertEqual(decode_error(body)[0], libvirt.VIR_ERR_RPC)

    def test_malformed_packets_close_only_that_connection(self):
        good = RawClient(self.daemon.sock)
        good.open()
        for bad in (struct.pack(">I", 8) + b"\0" * 4,              # shorter than a header
                    struct.pack(">I", 0x7FFFFFFF),                   # over the size limit
                    struct.pack(">I", 28) + struct.pack(">IIiIII", REMOTE_PROGRAM, 1, 3, 9, 1, 0)):
            c = RawClient(self.daemon.sock)
            c.sock.sendall(bad)
            try:
                dropped = c.sock.recv(100) == b""
            except ConnectionResetError:   # closed with our bytes unread
                dropped = True
            self.assertTrue(dropped, "the daemon should drop the connection")
            c.close()
        # Arguments that do not decode get an error, not a hang.
        status, body = good.call(23, b"\xff\xff\xff\xff")
        self.assertEqual(status, 1)
        self.assertEqual(decode_error(body)[0], libvirt.VIR_ERR_RPC)
        status, _ = good.call(3)
        self.assertEqual(status, 0)

    def test_read_only_socket_refuses_changes(self):
        # libvirt's client refuses locally; a raw client that does not must be
        # refused by the daemon itself.
        c = RawClient(self.daemon.sock_ro)
        c.open(flags=0)
        status, body = c.call(11, xdr_string(domain_xml("ro1")))   # DEFINE_XML
        self.assertEqual(status, 1)
        code, _, message = decode_error(body)
        self.assertEqual(code, libvirt.VIR_ERR_OPERATION_DENIED)
        self.assertIn("read-only", message)
        status, _ = c.call(3)
        self.assertEqual(status, 0)
        self.assertEqual(self.daemon.virsh("list", "--all", "--name").stdout.strip(), "")

    def test_read_only_connection_through_libvirt(self):
        conn = self.daemon.connect(readonly=True)
        self.assertEqual(conn.getType(), "vsnap")
        with self.assertRaises(libvirt.libvirtError) as ctx:
            conn.defineXML(domain_xml("ro2"))
        self.assertEqual(ctx.exception.get_error_code(), libvirt.VIR_ERR_OPERATION_DENIED)
        res = self.daemon.virsh("define", "/dev/null", ro=True, check=False)
        self.assertNotEqual(res.returncode, 0)
        conn.close()

    def test_pipelined_calls_each_get_one_reply(self):
        c = RawClient(self.daemon.sock)
        c.open()
        n = 300
        for serial in range(1000, 1000 + n):
            c.send_packet(REMOTE_PROGRAM, 1, 3, CALL, serial, 0)   # GET_TYPE
        # This client reads nothing yet; the daemon must still serve others.
        other = RawClient(self.daemon.sock)
        other.open()
        self.assertEqual(other.call(3)[0], 0)
        other.close()
        replies = {}
        while len(replies) < n:
            hdr, body = c.recv_packet()
            self.assertNotIn(hdr[4], replies)
            replies[hdr[4]] = (hdr[5], body)
        self.assertEqual(set(replies), set(range(1000, 1000 + n)))
        # Beyond the per-connection limit the daemon waits before reading
        # more, so every call succeeds.
        self.assertEqual({status for status, _ in replies.values()}, {0})
        self.assertEqual(c.call(3)[0], 0)

    def test_unknown_program_gets_an_error(self):
        c = RawClient(self.daemon.sock)
        c.send_packet(0x12345678, 1, 1, CALL, 7, 0)
        hdr, body = c.recv_packet()
        self.assertEqual((hdr[3], hdr[4], hdr[5]), (1, 7, 1))
        self.assertEqual(decode_error(body)[0], libvirt.VIR_ERR_RPC)


if __name__ == "__main__":
    unittest.main(verbosity=2)
