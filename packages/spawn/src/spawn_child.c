/*
 * The child of a spawn, before it execs (see spawn_child.h). glibc's posix_spawn maps a stack
 * for each child and unmaps it after, and with every signal in its default set makes 63
 * sigaction calls in the child: on a virtual machine the new stack's page faults, the
 * unmapping (which interrupts every core running one of the caller's threads) and the system
 * calls made the call 2x slower than the exec itself (bench/RESULTS.md, the twenty-sixth
 * session). Here the stack is kept, and only the signals the caller ignores or catches are
 * reset.
 */
#define _GNU_SOURCE
#include "spawn_child.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Room for what a child does before it execs: a few system calls. */
#define CHILD_STACK_BYTES (64 * 1024)

/* A hexadecimal mask of /proc/self/status (`SigIgn:\t0000000000001000`) after `name`. */
static bool status_mask(const char *status, const char *name, uint64_t *mask) {
  const char *at = strstr(status, name);
  if (at == NULL) return false;
  char *end;
  *mask = strtoull(at + strlen(name), &end, 16);
  return end != at + strlen(name);
}

/*
 * The signals this process ignores or catches (bit n-1 for signal n), from /proc/self/status:
 * the others are at their default already. Every signal when it cannot be read. One read in
 * the parent costs a tenth of resetting all 64 signals in the child, a system call each.
 */
static uint64_t dispositions(void) {
  char status[8192];
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return UINT64_MAX;
  size_t length = 0;
  ssize_t got;
  while (length < sizeof status - 1 &&
         (got = read(fd, status + length, sizeof status - 1 - length)) > 0)
    length += (size_t)got;
  close(fd);
  status[length] = '\0';
  uint64_t ignored, caught;
  if (!status_mask(status, "\nSigIgn:\t", &ignored) || !status_mask(status, "\nSigCgt:\t", &caught))
    return UINT64_MAX;
  return ignored | caught;
}

/*
 * The child, before it execs. It runs on the parent's memory while the parent waits: it only
 * makes system calls (no allocation, no lock another thread may hold), and writes nothing of the
 * parent's but `error`. Every signal goes back to its default before any is unblocked: a
 * handler of the parent's must never run here.
 */
static int child_main(void *arg) {
  child_t *c = arg;
  struct sigaction defaults;
  memset(&defaults, 0, sizeof defaults);
  defaults.sa_handler = SIG_DFL;
  for (int sig = 1; sig < _NSIG && sig <= 64; sig++) {
    if (sig != SIGKILL && sig != SIGSTOP && (c->reset >> (sig - 1) & 1))
      sigaction(sig, &defaults, NULL);
  }
  if (c->new_session && setsid() < 0) goto failed;
  for (int i = 0; i < 3; i++)
    if (dup2(c->fds[i], i) < 0) goto failed;
  if (c->cwd != NULL && chdir(c->cwd) != 0) goto failed;
  sigset_t none;
  sigemptyset(&none);
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, _NSIG / 8);
  execve(c->file, c->argv, c->envp);
failed:
  c->error = errno;
  _exit(127);
}

/*
 * Starts `c` as glibc's posix_spawn does (CLONE_VM | CLONE_VFORK: the caller waits until the
 * child has exec'd or failed), on the stack kept in `*stack` (made on first use). Every signal is blocked around the
 * clone (the internal ones of the C library too: a raw mask), so that none reaches the child
 * before its handlers are reset. Returns the pid, or -1 with errno set.
 */
pid_t spawn_child(char **stack, child_t *c) {
  if (*stack == NULL) {
    *stack = malloc(CHILD_STACK_BYTES);
    if (*stack == NULL) {
      errno = ENOMEM;
      return -1;
    }
    /* Touched now: its pages are in place before the first child runs on them. */
    memset(*stack, 0, CHILD_STACK_BYTES);
  }
  /* The stack grows down on every architecture Node runs on Linux; its top 16-byte aligned. */
  char *top = (char *)(((uintptr_t)(*stack + CHILD_STACK_BYTES)) & ~(uintptr_t)15);
  unsigned char all[_NSIG / 8];
  unsigned char saved[_NSIG / 8];
  memset(all, 0xff, sizeof all);
  syscall(SYS_rt_sigprocmask, SIG_BLOCK, all, saved, _NSIG / 8);
  c->error = 0;
  /* Read just before the clone: handlers are set by this thread (Node's), not in between. */
  c->reset = dispositions();
  pid_t pid = clone(child_main, top, CLONE_VM | CLONE_VFORK | SIGCHLD, c);
  int clone_error = errno;
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, saved, NULL, _NSIG / 8);
  if (pid < 0) {
    errno = clone_error;
    return -1;
  }
  if (c->error != 0) {
    /* It could not exec and has exited: reaped here, as posix_spawn reaps it. */
    int error = c->error;
    waitpid(pid, NULL, 0);
    errno = error;
    return -1;
  }
  return pid;
}
