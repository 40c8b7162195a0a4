/* The sandbox's two small stages in one program, compiled once (overlayfs/stage.py) so that
 * entering the sandbox costs no interpreter start.
 *
 *   stage [OPTION]... -- ARGV...
 *
 * Options are applied in the order given, then ARGV is exec'd (PATH searched):
 *   -c FILE           write this process's pid to FILE (a leaf cgroup's cgroup.procs: join it first, so
 *                     that every process of the sandbox is counted)
 *   -U FD             join the user namespace FD (a bounded upper layer's, see overlayfs/bounded.py), close
 *                     FD, and make a new mount namespace in it
 *   -n                make a new mount namespace (and, without root, a user namespace mapping this uid
 *                     to 0 and nothing else, only to mount: bubblewrap drops it again)
 *   -o TARGET LOWER UPPER WORK
 *                     mount kernel overlayfs at TARGET (userxattr without root); after -U or -n, whose
 *                     namespace is made private first, so that nothing mounted here reaches the host
 *   -a FROM AT        clone the mount at FROM (a bounded layer, named /proc/self/fd/N) onto the directory AT,
 *                     in the private namespace (fuse-overlayfs needs its layers at real paths)
 *   -h FD             hand-off on the unix socket FD: say "r" (the namespace is ready), receive one
 *                     descriptor (the FUSE device of a mount made on the host), keep it open across the
 *                     exec and put its number for "{fd}" in ARGV; close FD
 *   -x FD             close FD
 *   -m                go on in a user namespace mapping every uid and gid to itself (root on another user's
 *                     project, overlayfs/sandbox/policy.py runs_mapped): a child unshares it and sets
 *                     user.max_user_namespaces to 0 there, this process (root in the parent namespace,
 *                     which alone may write such a mapping) maps it, then waits and exits with its status
 *   -r NAME=VALUE     set the soft and hard rlimit NAME (NPROC DATA CPU FSIZE NOFILE CORE) to VALUE
 *   -w PATH           a tree Landlock leaves writable (a missing PATH is skipped)
 *   -l ABI            restrict this process with Landlock (ABI: the kernel's version, 0: skip): files
 *                     may be created, written, renamed or removed only beneath the -w paths; ABI >= 6
 *                     also scopes signals and abstract unix sockets. Needs no_new_privs (bwrap set it).
 *                     Applied after every other option, just before the exec.
 *
 * Stage one (on the host) uses -c, -U/-n, -o, -a, -x, -m and execs bubblewrap (or -U/-n, -a, -h, -x and execs
 * fuse-overlayfs on a bounded layer, overlayfs/fuse_overlayfs.py); the inner stage (bubblewrap's
 * command, inside the sandbox) uses -r, -w, -l and execs the command. A failure to set up writes
 * "sandbox setup failed: ..." on stderr and exits 125 (overlayfs/sandbox/run.py raises it, never reports
 * it as the command's status); a command that cannot be exec'd exits 127. The Python stages
 * (overlayfs/_nsexec.py, overlayfs/sandbox/_inner.py) do the same where no compiler is at hand.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define SETUP_FAILED 125
#define MAX_WRITABLE 32

#ifndef SYS_open_tree
#define SYS_open_tree 428
#define SYS_move_mount 429
#endif
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

/* LANDLOCK_ACCESS_FS_*: every write-side right, by the ABI that introduced it. */
#define WRITE_V1 ((1ULL << 1) | (1ULL << 4) | (1ULL << 5) | (1ULL << 6) | (1ULL << 7) | (1ULL << 8) | \
                  (1ULL << 9) | (1ULL << 10) | (1ULL << 11) | (1ULL << 12))
#define REFER (1ULL << 13)
#define TRUNCATE (1ULL << 14)
#define IOCTL_DEV (1ULL << 15)
#define SCOPE_ABSTRACT_UNIX 1ULL
#define SCOPE_SIGNAL 2ULL

struct ruleset_attr {
    uint64_t handled_access_fs, handled_access_net, scoped;
};

struct __attribute__((packed)) path_beneath {
    uint64_t allowed_access;
    int32_t parent_fd;
};

static void fail(const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    dprintf(2, "sandbox setup failed: %s\n", msg);
    _exit(SETUP_FAILED);
}

static void write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) fail("open %s: %s", path, strerror(errno));
    size_t n = strlen(text);
    if (write(fd, text, n) != (ssize_t)n) fail("write %s: %s", path, strerror(errno));
    close(fd);
}

static int number(const char *s, const char *what) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 0 || v > 1 << 30) fail("bad %s %s", what, s);
    return (int)v;
}

static void private_namespace(int userns) {
    if (userns >= 0) {  /* the bounded layer's: all capabilities there, the same uid as outside */
        if (setns(userns, CLONE_NEWUSER) != 0) fail("setns to the upper layer's user namespace: %s", strerror(errno));
        close(userns);
        if (unshare(CLONE_NEWNS) != 0) fail("unshare: %s", strerror(errno));
    } else {
        uid_t uid = geteuid();
        gid_t gid = getegid();
        if (unshare(CLONE_NEWNS | (uid != 0 ? CLONE_NEWUSER : 0)) != 0) fail("unshare: %s", strerror(errno));
        if (uid != 0) {  /* root of a namespace of our own, only to mount: bwrap drops it again */
            char map[64];
            write_file("/proc/self/setgroups", "deny");
            snprintf(map, sizeof map, "0 %u 1", (unsigned)uid);
            write_file("/proc/self/uid_map", map);
            snprintf(map, sizeof map, "0 %u 1", (unsigned)gid);
            write_file("/proc/self/gid_map", map);
        }
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) fail("mount /: %s", strerror(errno));
}

static void mount_overlay(const char *target, const char *lower, const char *upper, const char *work) {
    char opts[8192];
    int n = snprintf(opts, sizeof opts, "lowerdir=%s,upperdir=%s,workdir=%s%s", lower, upper, work,
                     geteuid() != 0 ? ",userxattr" : "");
    if (n < 0 || (size_t)n >= sizeof opts) fail("overlay options too long");
    if (mount("speculate-overlay", target, "overlay", 0, opts) != 0) fail("mount %s: %s", target, strerror(errno));
}

static void attach(const char *from, const char *at) {
    int tree = (int)syscall(SYS_open_tree, AT_FDCWD, from, 1 /* OPEN_TREE_CLONE */ | O_CLOEXEC);
    if (tree < 0) fail("open_tree %s: %s", from, strerror(errno));
    if (syscall(SYS_move_mount, tree, "", AT_FDCWD, at, 4 /* MOVE_MOUNT_F_EMPTY_PATH */) != 0)
        fail("move_mount %s: %s", at, strerror(errno));
    close(tree);
}

static void map_every_id(void) {
    int ready[2], go[2];
    if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(go, O_CLOEXEC) != 0) fail("pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) fail("fork: %s", strerror(errno));
    char c = 'r';
    if (pid == 0) {  /* the child: the namespace, then the rest of the options and the exec */
        close(ready[0]);
        close(go[1]);
        if (unshare(CLONE_NEWUSER) != 0) fail("unshare a user namespace: %s", strerror(errno));
        if (write(ready[1], &c, 1) != 1) fail("map hand-off: %s", strerror(errno));
        close(ready[1]);
        if (read(go[0], &c, 1) != 1 || c != 'g') _exit(SETUP_FAILED);  /* the parent said why */
        close(go[0]);
        write_file("/proc/sys/user/max_user_namespaces", "0");  /* bwrap's --disable-userns, here */
        return;
    }
    close(ready[1]);
    close(go[0]);
    if (read(ready[0], &c, 1) != 1) fail("the child made no user namespace");
    char path[64];
    static const char *const maps[] = {"uid_map", "setgroups", "gid_map"};
    for (size_t k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, maps[k]);
        write_file(path, k == 1 ? "allow" : "0 0 4294967295");  /* every id the kernel has, to itself */
    }
    c = 'g';
    if (write(go[1], &c, 1) != 1) fail("map hand-off: %s", strerror(errno));
    close(go[1]);
    close(ready[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) fail("waitpid: %s", strerror(errno));
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

static int handoff(int sock) {
    char byte = 'r';
    if (send(sock, &byte, 1, 0) != 1) fail("hand-off: %s", strerror(errno));
    char data[1], control[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {data, 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
    if (recvmsg(sock, &msg, 0) < 0) fail("hand-off: %s", strerror(errno));
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    if (c == NULL || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) fail("no FUSE descriptor was handed over");
    int fd;
    memcpy(&fd, CMSG_DATA(c), sizeof fd);
    close(sock);
    return fd;
}

static char *with_fd(const char *arg, int fd) {
    const char *at = strstr(arg, "{fd}");
    if (at == NULL) return (char *)arg;
    size_t n = strlen(arg) + 16;
    char *out = malloc(n);
    if (out == NULL) fail("out of memory");
    snprintf(out, n, "%.*s%d%s", (int)(at - arg), arg, fd, at + 4);
    return out;
}

static void set_rlimit(const char *spec) {
    static const struct { const char *name; int res; } names[] = {
        {"NPROC", RLIMIT_NPROC}, {"DATA", RLIMIT_DATA}, {"CPU", RLIMIT_CPU}, {"FSIZE", RLIMIT_FSIZE},
        {"NOFILE", RLIMIT_NOFILE}, {"CORE", RLIMIT_CORE}, {"AS", RLIMIT_AS}, {"STACK", RLIMIT_STACK},
    };
    const char *eq = strchr(spec, '=');
    if (eq == NULL) fail("bad rlimit %s", spec);
    char *end;
    errno = 0;
    unsigned long long v = strtoull(eq + 1, &end, 10);
    if (errno || *end || eq[1] == '\0') fail("bad rlimit %s", spec);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strlen(names[i].name) == (size_t)(eq - spec) && strncmp(names[i].name, spec, eq - spec) == 0) {
            struct rlimit rl = {v, v};
            if (setrlimit(names[i].res, &rl) != 0) fail("setrlimit %s: %s", spec, strerror(errno));
            return;
        }
    }
    fail("unknown rlimit %s", spec);
}

static void landlock(int abi, char **writable, int n) {
    uint64_t access = WRITE_V1 | (abi >= 2 ? REFER : 0) | (abi >= 3 ? TRUNCATE : 0) | (abi >= 5 ? IOCTL_DEV : 0);
    struct ruleset_attr attr = {access, 0, abi >= 6 ? (SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL) : 0};
    size_t size = abi < 4 ? 8 : abi < 6 ? 16 : 24;  /* older kernels reject fields they do not know */
    int fd = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
    if (fd < 0) fail("landlock_create_ruleset: %s", strerror(errno));
    for (int i = 0; i < n; i++) {
        int pfd = open(writable[i], O_PATH | O_CLOEXEC);
        if (pfd < 0) {
            if (errno == ENOENT) continue;
            fail("open %s: %s", writable[i], strerror(errno));
        }
        struct path_beneath rule = {access, pfd};
        if (syscall(SYS_landlock_add_rule, fd, 1 /* LANDLOCK_RULE_PATH_BENEATH */, &rule, 0) != 0)
            fail("landlock_add_rule %s: %s", writable[i], strerror(errno));
        close(pfd);
    }
    if (syscall(SYS_landlock_restrict_self, fd, 0) != 0) fail("landlock_restrict_self: %s", strerror(errno));
    close(fd);
}

int main(int argc, char **argv) {
    char *writable[MAX_WRITABLE];
    int nwritable = 0, abi = 0, handed = -1, i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *opt = argv[i];
        int need = strcmp(opt, "-n") == 0 || strcmp(opt, "-m") == 0 ? 0 : strcmp(opt, "-o") == 0 ? 4 : strcmp(opt, "-a") == 0 ? 2 : 1;
        if (opt[0] != '-' || opt[1] == '\0' || opt[2] != '\0' || i + need >= argc) fail("bad option %s", opt);
        switch (opt[1]) {
        case 'c': {
            char pid[32];
            snprintf(pid, sizeof pid, "%d", (int)getpid());
            write_file(argv[i + 1], pid);
            break;
        }
        case 'U': private_namespace(number(argv[i + 1], "descriptor")); break;
        case 'n': private_namespace(-1); break;
        case 'o': mount_overlay(argv[i + 1], argv[i + 2], argv[i + 3], argv[i + 4]); break;
        case 'a': attach(argv[i + 1], argv[i + 2]); break;
        case 'h': handed = handoff(number(argv[i + 1], "descriptor")); break;
        case 'x': close(number(argv[i + 1], "descriptor")); break;
        case 'm': map_every_id(); break;
        case 'r': set_rlimit(argv[i + 1]); break;
        case 'w':
            if (nwritable == MAX_WRITABLE) fail("too many writable paths");
            writable[nwritable++] = argv[i + 1];
            break;
        case 'l': abi = number(argv[i + 1], "Landlock ABI"); break;
        default: fail("bad option %s", opt);
        }
        i += need;
    }
    if (i + 1 >= argc) fail("no command after --");
    if (abi > 0) landlock(abi, writable, nwritable);
    if (handed >= 0)
        for (int k = i + 1; k < argc; k++) argv[k] = with_fd(argv[k], handed);
    execvp(argv[i + 1], argv + i + 1);
    dprintf(2, "sandbox: cannot run '%s': %s\n", argv[i + 1], strerror(errno));
    return 127;
}
