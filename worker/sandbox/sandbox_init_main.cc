// tessera-sandbox-init: the first program a rank runs inside its sandbox, linked statically so
// that it runs in any image, whatever libc the image has (or none).
//
// The worker starts bubblewrap with SIGTERM, SIGINT and SIGHUP ignored: a stop signals the
// rank's whole process group, and bubblewrap (outside and as the sandbox's PID 1) must survive
// it, or the sandbox would be torn down before the rank could checkpoint. Ignored signals are
// inherited through exec and a shell cannot undo that ("signals ignored on entry cannot be
// trapped"), so the command is started with every signal's default restored, every signal
// unblocked and every descriptor but the three standard ones closed.
//
// This program stays, as the command's parent and the subreaper of everything the command
// starts, ignoring every signal a stop or a user sends to the group: when the command (a node's
// launcher) exits while processes it started live on, that is a failure of the run, said on
// stderr, and they are killed with it, whatever the command's own exit code was. Then it exits
// as the command did (by the same signal, or with its code), which bubblewrap passes on.
#include <errno.h>
#include <linux/close_range.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

// What the command left running when it exited: killed, and a message for the run's log.
// Returns whether there was any.
bool KillLeftovers(int command_status) {
  int status = 0;
  pid_t pid = 0;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
  }
  if (pid != 0) return false;  // ECHILD: nothing left
  char how[64];
  if (WIFSIGNALED(command_status)) {
    snprintf(how, sizeof how, "was killed by signal %d", WTERMSIG(command_status));
  } else {
    snprintf(how, sizeof how, "exited with %d", WEXITSTATUS(command_status));
  }
  fprintf(stderr,
          "[tessera] the command %s while processes it started were still running: they were "
          "killed, and the run fails (a launcher must wait for its ranks)\n",
          how);
  kill(-1, SIGKILL);  // every process of this PID namespace but its init and this one
  while (waitpid(-1, &status, 0) > 0 || errno == EINTR) {
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fputs("usage: tessera-sandbox-init COMMAND [ARG...]\n", stderr);
    return 127;
  }
  // Orphans of the command become this program's children, so it can tell whether any are left.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  syscall(SYS_close_range, 3U, ~0U, 0U);
  const pid_t command = fork();
  if (command < 0) {
    fprintf(stderr, "tessera-sandbox-init: cannot fork: %s\n", strerror(errno));
    return 127;
  }
  struct sigaction action;
  memset(&action, 0, sizeof action);
  if (command == 0) {
    action.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &action, nullptr);  // KILL/STOP: EINVAL
    execvp(argv[1], argv + 1);
    fprintf(stderr, "tessera-sandbox-init: cannot execute %s: %s\n", argv[1], strerror(errno));
    _exit(127);
  }
  // Only the command's end ends this program; SIGCHLD keeps its default, so children are not
  // reaped away from waitpid.
  action.sa_handler = SIG_IGN;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGCHLD) sigaction(sig, &action, nullptr);
  }
  int status = 0;
  for (;;) {
    int s = 0;
    const pid_t pid = waitpid(-1, &s, 0);
    if (pid == command) {
      status = s;
      break;
    }
    if (pid < 0 && errno != EINTR) return 127;  // cannot happen: the command is a child
  }
  const bool leftovers = KillLeftovers(status);
  if (WIFSIGNALED(status)) {
    action.sa_handler = SIG_DFL;
    sigaction(WTERMSIG(status), &action, nullptr);
    kill(getpid(), WTERMSIG(status));
    return 128 + WTERMSIG(status);
  }
  const int code = WEXITSTATUS(status);
  return leftovers && code == 0 ? 1 : code;
}
