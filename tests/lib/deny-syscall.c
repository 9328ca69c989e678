/* vsnap-deny-syscall CALL[,CALL...] PROGRAM [ARGS...]: run PROGRAM with the
 * named system calls answered ENOSYS, as a kernel without them answers (the
 * io_uring fallback test: tests/blk/test_blk.py uring_fallback). The filter
 * is a real seccomp filter the program inherits; its own filters stack on it. */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int deny(scmp_filter_ctx ctx, char *names)
{
    for (char *save = NULL, *name = strtok_r(names, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        int nr = seccomp_syscall_resolve_name(name);
        if (nr == __NR_SCMP_ERROR) {
            fprintf(stderr, "vsnap-deny-syscall: no system call %s\n", name);
            return -EINVAL;
        }
        int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: vsnap-deny-syscall CALL[,CALL...] PROGRAM [ARGS...]\n");
        return 2;
    }
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    int rc = ctx ? deny(ctx, argv[1]) : -ENOMEM;
    if (rc == 0)
        rc = seccomp_load(ctx);
    if (rc < 0) {
        fprintf(stderr, "vsnap-deny-syscall: cannot install the filter: %s\n", strerror(-rc));
        return 1;
    }
    seccomp_release(ctx);
    execvp(argv[2], argv + 2);
    fprintf(stderr, "vsnap-deny-syscall: %s: %s\n", argv[2], strerror(errno));
    return 127;
}
