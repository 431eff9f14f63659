// tessera-sandbox-init: the first program a rank runs inside its sandbox, linked statically so
// that it runs in any image, whatever libc the image has (or none).
//
// The worker starts bubblewrap with SIGTERM, SIGINT and SIGHUP ignored: a stop signals the
// rank's whole process group, and bubblewrap (outside and as the sandbox's PID 1) must survive
// it, or the sandbox would be torn down before the rank could checkpoint. Ignored signals are
// inherited through exec and a shell cannot undo that ("signals ignored on entry cannot be
// trapped"), so this program restores every signal's default, unblocks them all, closes every
// descriptor but the three standard ones, and executes the rank's command.
#include <errno.h>
#include <linux/close_range.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    fputs("usage: tessera-sandbox-init COMMAND [ARG...]\n", stderr);
    return 127;
  }
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);  // KILL/STOP: EINVAL
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  syscall(SYS_close_range, 3U, ~0U, 0U);
  execvp(argv[1], argv + 1);
  fprintf(stderr, "tessera-sandbox-init: cannot execute %s: %s\n", argv[1], strerror(errno));
  return 127;
}
