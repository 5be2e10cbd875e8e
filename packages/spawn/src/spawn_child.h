/*
 * Starting a child as glibc's posix_spawn does — on the caller's memory until it execs — but on
 * a stack kept from one spawn to the next, resetting only the signals not at their default
 * (see spawn_child.c). Used by posix_spawn.c.
 */
#ifndef LOOPRUN_SPAWN_CHILD_H
#define LOOPRUN_SPAWN_CHILD_H
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* What a child gets from its parent, on the parent's memory (CLONE_VM). */
typedef struct child {
  const char *file;
  char **argv;
  char **envp;
  const char *cwd;
  const int *fds;
  bool new_session;
  /* The signals not at their default (see dispositions): the child resets these. */
  uint64_t reset;
  /* Set by a child that could not exec: the errno of what failed. */
  volatile int error;
} child_t;

/*
 * Starts `c`; the caller waits until the child has exec'd or failed. `*stack` is the children's
 * stack, made on first use and kept (one spawn at a time may use it). Returns the pid, or -1
 * with errno set (a child that could not exec has been reaped).
 */
pid_t spawn_child(char **stack, child_t *c);

#endif
