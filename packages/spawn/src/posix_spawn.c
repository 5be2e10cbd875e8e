/*
 * Spawning without copying the caller: the child runs on the caller's memory until it execs
 * (clone with CLONE_VM | CLONE_VFORK, as glibc's posix_spawn does), where Node's spawn forks the
 * whole process and its page tables. Measured: 40 iterations of a two-command loop took 95 ms
 * this way from a Node process, 146 ms through child_process.spawn and 104 ms in bash
 * (bench/RESULTS.md). The child itself is started by spawn_child.c, on a stack kept from one
 * spawn to the next.
 *
 * Exposed to JavaScript (index.ts types it; packages/core/src/process/posix-launch.ts uses it):
 *   pipe() -> [readFd, writeFd]       a pipe, both ends close-on-exec
 *   spawn(file, argv, envp, cwd | null, [stdin, stdout, stderr], newSession, onExit) -> pid
 *     onExit(code | null, signalNumber | null) is called once the process is reaped: a pidfd
 *     in the event loop tells when it has exited. Errors carry a negative errno, as Node's.
 *   ref(pid, on) -> whether it watches pid; its watch keeps the event loop alive or not
 *   usable: false with `reason` when this kernel has no pidfd_open (Linux < 5.3).
 */
#define _GNU_SOURCE
#define NAPI_VERSION 8
#include <errno.h>
#include <fcntl.h>
#include <node_api.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "spawn_child.h"

typedef struct watch {
  uv_poll_t poll;
  int pidfd;
  pid_t pid;
  napi_env env;
  napi_ref callback;
  napi_async_context context;
  /* Closed by the cleanup hook (the environment ends), not by the process's exit. */
  bool by_cleanup;
  struct state *state;
  struct watch *prev, *next;
} watch_t;

/* Per environment (main thread or a worker thread): the processes still watched. */
typedef struct state {
  watch_t *watched;
  size_t closing;
  napi_async_cleanup_hook_handle cleanup;
  /* The children's stack (see spawn_child): made once, used by one spawn at a time. */
  char *stack;
} state_t;

/* An Error with the (negative, as Node's) errno and the call; posix-launch.ts names the errno. */
static napi_value throw_errno(napi_env env, int err, const char *call) {
  char text[256];
  snprintf(text, sizeof text, "%s: %s", call, strerror(err));
  napi_value message, error, number, syscall_name;
  napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &message);
  napi_create_error(env, NULL, message, &error);
  napi_create_int32(env, -err, &number);
  napi_set_named_property(env, error, "errno", number);
  napi_create_string_utf8(env, call, NAPI_AUTO_LENGTH, &syscall_name);
  napi_set_named_property(env, error, "syscall", syscall_name);
  napi_throw(env, error);
  return NULL;
}

static napi_value js_pipe(napi_env env, napi_callback_info info) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return throw_errno(env, errno, "pipe2");
  /* Never 0, 1 or 2 (this process closed its stdio): libuv never closes those, so a pipe end
   * there would stay open for good, and a child's stdin would never see its end. */
  for (int i = 0; i < 2; i++) {
    if (fds[i] > 2) continue;
    int moved = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
    if (moved < 0) {
      int saved = errno;
      close(fds[0]), close(fds[1]);
      return throw_errno(env, saved, "fcntl");
    }
    close(fds[i]);
    fds[i] = moved;
  }
  napi_value pair, end;
  napi_create_array_with_length(env, 2, &pair);
  for (uint32_t i = 0; i < 2; i++) {
    napi_create_int32(env, fds[i], &end);
    napi_set_element(env, pair, i, end);
  }
  return pair;
}

/* A copy of a JS string, or NULL; `*nul` is set when it held a NUL byte, which would cut it
 * short here (Node refuses such a string). */
static char *string_of(napi_env env, napi_value value, bool *nul) {
  size_t length;
  if (napi_get_value_string_utf8(env, value, NULL, 0, &length) != napi_ok) return NULL;
  char *text = malloc(length + 1);
  if (text == NULL) return NULL;
  napi_get_value_string_utf8(env, value, text, length + 1, &length);
  if (strlen(text) != length) {
    *nul = true;
    free(text);
    return NULL;
  }
  return text;
}

static void free_strings(char **strings) {
  if (strings == NULL) return;
  for (char **s = strings; *s != NULL; s++) free(*s);
  free(strings);
}

/* A NULL-terminated copy of an array of strings, or NULL when it is not one. */
static char **strings_of(napi_env env, napi_value array, bool *nul) {
  uint32_t n;
  if (napi_get_array_length(env, array, &n) != napi_ok) return NULL;
  char **strings = calloc(n + 1, sizeof(char *));
  if (strings == NULL) return NULL;
  for (uint32_t i = 0; i < n; i++) {
    napi_value element;
    napi_get_element(env, array, i, &element);
    strings[i] = string_of(env, element, nul);
    if (strings[i] == NULL) {
      free_strings(strings);
      return NULL;
    }
  }
  return strings;
}

/* The poll handle is closed: its descriptor can go now (libuv is done with it). */
static void freed(uv_handle_t *handle) {
  watch_t *w = handle->data;
  /* The state only while the cleanup hook waits for these closes (it keeps it alive). */
  state_t *state = w->by_cleanup ? w->state : NULL;
  close(w->pidfd);
  free(w);
  if (state != NULL && --state->closing == 0 && state->cleanup != NULL) {
    napi_remove_async_cleanup_hook(state->cleanup);
    state->cleanup = NULL;
  }
}

static void unwatch(state_t *state, watch_t *w) {
  uv_poll_stop(&w->poll);
  if (w->prev != NULL) w->prev->next = w->next;
  else state->watched = w->next;
  if (w->next != NULL) w->next->prev = w->prev;
}

static void exited(uv_poll_t *poll, int status, int events) {
  watch_t *w = poll->data;
  napi_env env = w->env;
  int wstatus = 0;
  pid_t reaped = waitpid(w->pid, &wstatus, WNOHANG);
  if (reaped == 0) return; /* not yet (a spurious wake-up) */
  state_t *state;
  napi_get_instance_data(env, (void **)&state);
  unwatch(state, w);

  napi_handle_scope scope;
  napi_open_handle_scope(env, &scope);
  napi_value callback, receiver, args[2], result;
  napi_get_reference_value(env, w->callback, &callback);
  napi_get_global(env, &receiver);
  if (reaped > 0 && WIFEXITED(wstatus)) {
    napi_create_int32(env, WEXITSTATUS(wstatus), &args[0]);
    napi_get_null(env, &args[1]);
  } else if (reaped > 0 && WIFSIGNALED(wstatus)) {
    napi_get_null(env, &args[0]);
    napi_create_int32(env, WTERMSIG(wstatus), &args[1]);
  } else {
    /* Reaped by someone else (ECHILD): its status is lost. */
    napi_get_null(env, &args[0]);
    napi_get_null(env, &args[1]);
  }
  if (napi_make_callback(env, w->context, receiver, callback, 2, args, &result) ==
      napi_pending_exception) {
    napi_value error;
    napi_get_and_clear_last_exception(env, &error);
    napi_fatal_exception(env, error);
  }
  napi_delete_reference(env, w->callback);
  napi_async_destroy(env, w->context);
  napi_close_handle_scope(env, scope);
  uv_close((uv_handle_t *)poll, freed);
}

static napi_value js_spawn(napi_env env, napi_callback_info info) {
  size_t argc = 7;
  napi_value argv[7];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 7) {
    napi_throw_type_error(env, NULL, "spawn(file, argv, envp, cwd, stdio, newSession, onExit)");
    return NULL;
  }
  napi_valuetype cwd_type;
  napi_typeof(env, argv[3], &cwd_type);
  int fds[3];
  for (uint32_t i = 0; i < 3; i++) {
    napi_value fd;
    napi_get_element(env, argv[4], i, &fd);
    if (napi_get_value_int32(env, fd, &fds[i]) != napi_ok) fds[i] = -1;
  }
  bool new_session = false;
  napi_get_value_bool(env, argv[5], &new_session);

  bool nul = false;
  char *file = string_of(env, argv[0], &nul);
  char **args = strings_of(env, argv[1], &nul);
  char **envp = strings_of(env, argv[2], &nul);
  char *cwd = cwd_type == napi_string ? string_of(env, argv[3], &nul) : NULL;
  if (file == NULL || args == NULL || envp == NULL || fds[0] < 0 || fds[1] < 0 || fds[2] < 0 ||
      (cwd_type == napi_string && cwd == NULL)) {
    free(file), free_strings(args), free_strings(envp), free(cwd);
    if (nul)
      napi_throw_type_error(env, "ERR_INVALID_ARG_VALUE", "spawn: a string holds a NUL byte");
    else
      napi_throw_type_error(env, NULL, "spawn: bad arguments");
    return NULL;
  }

  /* A descriptor given for the child's stdio that is itself 0, 1 or 2 (this process started with
   * one of them closed) would be overwritten by an earlier dup2: each is moved above 2 first. */
  int moved[3] = {-1, -1, -1};
  for (int i = 0; i < 3; i++) {
    if (fds[i] > 2) continue;
    moved[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
    if (moved[i] < 0) {
      int saved = errno;
      for (int j = 0; j < i; j++)
        if (moved[j] >= 0) close(moved[j]);
      free(file), free_strings(args), free_strings(envp), free(cwd);
      return throw_errno(env, saved, "fcntl");
    }
    fds[i] = moved[i];
  }
  state_t *state;
  napi_get_instance_data(env, (void **)&state);
  child_t child = {
      .file = file,
      .argv = args,
      .envp = envp,
      .cwd = cwd,
      .fds = fds,
      .new_session = new_session,
  };
  pid_t pid = spawn_child(&state->stack, &child);
  int err = pid < 0 ? errno : 0;
  for (int i = 0; i < 3; i++)
    if (moved[i] >= 0) close(moved[i]);
  napi_value thrown = NULL;
  if (err != 0) thrown = throw_errno(env, err, "spawn");
  free(file), free_strings(args), free_strings(envp), free(cwd);
  if (err != 0) return thrown;

  /* It runs: from here, a failure to watch it kills it (nobody would ever see it end). */
  uv_loop_t *loop;
  napi_get_uv_event_loop(env, &loop);
  int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  int failed = pidfd < 0 ? errno : 0;
  watch_t *w = failed == 0 ? calloc(1, sizeof *w) : NULL;
  if (failed == 0 && w == NULL) failed = ENOMEM;
  const char *call = pidfd < 0 ? "pidfd_open" : "calloc";
  if (failed == 0) {
    w->pidfd = pidfd;
    w->pid = pid;
    w->env = env;
    w->state = state;
    call = "uv_poll_init";
    if (uv_poll_init(loop, &w->poll, pidfd) != 0) failed = EINVAL;
  }
  if (failed != 0) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    free(w);
    if (pidfd >= 0) close(pidfd);
    return throw_errno(env, failed, call);
  }
  w->poll.data = w;
  if (uv_poll_start(&w->poll, UV_READABLE, exited) != 0) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    uv_close((uv_handle_t *)&w->poll, freed); /* closes the pidfd, frees w */
    return throw_errno(env, EINVAL, "uv_poll_start");
  }
  napi_create_reference(env, argv[6], 1, &w->callback);
  napi_value name;
  napi_create_string_utf8(env, "looprun:spawn", NAPI_AUTO_LENGTH, &name);
  napi_async_init(env, NULL, name, &w->context);
  w->next = state->watched;
  if (state->watched != NULL) state->watched->prev = w;
  state->watched = w;

  napi_value result;
  napi_create_int32(env, pid, &result);
  return result;
}

/*
 * ref(pid, on): whether the watch of a running process keeps the event loop alive (a process
 * kept for later requests, idle, does not). False when no such process is watched.
 */
static napi_value js_ref(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  int32_t pid = 0;
  bool on = true;
  napi_value result;
  if (argc < 2 || napi_get_value_int32(env, argv[0], &pid) != napi_ok ||
      napi_get_value_bool(env, argv[1], &on) != napi_ok) {
    napi_throw_type_error(env, NULL, "ref(pid, on)");
    return NULL;
  }
  state_t *state;
  napi_get_instance_data(env, (void **)&state);
  watch_t *w = state->watched;
  while (w != NULL && w->pid != pid) w = w->next;
  if (w != NULL) {
    if (on) uv_ref((uv_handle_t *)&w->poll);
    else uv_unref((uv_handle_t *)&w->poll);
  }
  napi_get_boolean(env, w != NULL, &result);
  return result;
}

/* The environment ends (a worker thread exits) with processes still watched: stop watching. */
static void cleanup(napi_async_cleanup_hook_handle handle, void *data) {
  state_t *state = data;
  state->cleanup = handle;
  if (state->watched == NULL) {
    napi_remove_async_cleanup_hook(handle);
    state->cleanup = NULL;
    return;
  }
  while (state->watched != NULL) {
    watch_t *w = state->watched;
    unwatch(state, w);
    /* Reaped if it has ended; one still running is left to whoever inherits it. */
    waitpid(w->pid, NULL, WNOHANG);
    napi_delete_reference(w->env, w->callback);
    napi_async_destroy(w->env, w->context);
    w->by_cleanup = true;
    state->closing++;
    uv_close((uv_handle_t *)&w->poll, freed);
  }
}

static void finalize_state(napi_env env, void *data, void *hint) {
  state_t *state = data;
  free(state->stack);
  free(state);
}

static napi_value init(napi_env env, napi_value exports) {
  state_t *state = calloc(1, sizeof *state);
  napi_set_instance_data(env, state, finalize_state, NULL);
  napi_add_async_cleanup_hook(env, cleanup, state, NULL);

  int probe = (int)syscall(SYS_pidfd_open, getpid(), 0);
  napi_value usable, reason;
  napi_get_boolean(env, probe >= 0, &usable);
  napi_set_named_property(env, exports, "usable", usable);
  if (probe >= 0) {
    close(probe);
  } else {
    char text[128];
    snprintf(text, sizeof text, "pidfd_open: %s", strerror(errno));
    napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &reason);
    napi_set_named_property(env, exports, "reason", reason);
  }
  napi_property_descriptor methods[] = {
      {"pipe", NULL, js_pipe, NULL, NULL, NULL, napi_default, NULL},
      {"spawn", NULL, js_spawn, NULL, NULL, NULL, napi_default, NULL},
      {"ref", NULL, js_ref, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, 3, methods);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
