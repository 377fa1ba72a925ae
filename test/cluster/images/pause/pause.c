/*
 * codemode pause: the pod sandbox ("infra") process for the test cluster.
 *
 * Holds the pod's namespaces open by doing nothing. As PID 1 of a pod with a shared PID
 * namespace it also reaps orphaned children (SIGCHLD -> waitpid loop). SIGTERM and SIGINT
 * end it with exit status 0. Built with `gcc -static -Os`, so the image holds only /pause.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define VERSION "codemode-pause v1\n"

static void on_term(int sig) {
  (void)sig;
  static const char msg[] = "pause: shutting down\n";
  ssize_t r = write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)r;
  _exit(0);
}

static void on_chld(int sig) {
  (void)sig;
  int saved = errno;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
  errno = saved;
}

static int handle(int sig, void (*fn)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = fn;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | (sig == SIGCHLD ? SA_NOCLDSTOP : 0);
  return sigaction(sig, &sa, NULL);
}

int main(int argc, char **argv) {
  if (argc > 1 && (strcmp(argv[1], "-v") == 0 || strcmp(argv[1], "--version") == 0)) {
    ssize_t r = write(STDOUT_FILENO, VERSION, sizeof VERSION - 1);
    (void)r;
    return 0;
  }
  if (handle(SIGTERM, on_term) < 0 || handle(SIGINT, on_term) < 0 || handle(SIGCHLD, on_chld) < 0) {
    static const char msg[] = "pause: sigaction failed\n";
    ssize_t r = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)r;
    return 1;
  }
  /* Reap anything that was already a zombie before the handler was installed. */
  on_chld(SIGCHLD);
  for (;;) pause();
  return 42; /* unreachable */
}
