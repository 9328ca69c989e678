/* A UDP echo server (port 7 unless given): every datagram goes back to its
 * sender as it came. The network benchmark's reference for the kernel's own
 * path, where a Python echo would measure Python. Runs until killed.
 *
 *   vsnap-udp-echo [PORT]
 */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

int main(int argc, char **argv)
{
    int port = argc > 1 ? atoi(argv[1]) : 7;
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    int buf = 1 << 22;
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
    if (s < 0 || setsockopt(s, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf) < 0 ||
        bind(s, (struct sockaddr *)&addr, sizeof addr) < 0) {
        perror("vsnap-udp-echo");
        return 1;
    }
    static char data[65536];
    for (;;) {
        struct sockaddr_in from;
        socklen_t len = sizeof from;
        ssize_t n = recvfrom(s, data, sizeof data, 0, (struct sockaddr *)&from, &len);
        if (n >= 0)
            sendto(s, data, (size_t)n, 0, (struct sockaddr *)&from, len);
    }
}
