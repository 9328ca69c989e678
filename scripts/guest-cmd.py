#!/usr/bin/python3
"""Send line commands to the test guest's command port through a VM's hybrid
vsock socket (Cloud Hypervisor / Firecracker style: CONNECT <port>, OK <port>),
print each answer. Used by the demo; handy by hand too:

    scripts/guest-cmd.py /run/vsnap/demo/vsock.sock "FILL 0x1000000 4194304 7" "SUM 0x1000000 4194304"
    scripts/guest-cmd.py --port 5001 /run/vsnap/linux/vsock.sock "SHA 0 4096"   (the Linux guest's test service)
"""
import socket
import sys
import time

PORT = 5000


def connect(path, port, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(30)
        try:
            s.connect(path)
            s.sendall(b"CONNECT %d\n" % port)
            f = s.makefile("rb")
            if f.readline().startswith(b"OK "):
                return s, f
        except OSError:
            pass
        s.close()
        if time.monotonic() > deadline:
            sys.exit(f"guest-cmd: the guest's command port behind {path} does not answer")
        time.sleep(0.05)


def main():
    args = sys.argv[1:]
    port = PORT
    if args[:1] == ["--port"] and len(args) > 1:
        port, args = int(args[1]), args[2:]
    if len(args) < 2:
        sys.exit(__doc__)
    sock, reader = connect(args[0], port)
    for command in args[1:]:
        sock.sendall(command.encode() + b"\n")
        answer = reader.readline().decode().strip()
        if not answer:
            sys.exit(f"guest-cmd: the guest closed the connection after {command!r}")
        print(answer)
    sock.close()


if __name__ == "__main__":
    main()
