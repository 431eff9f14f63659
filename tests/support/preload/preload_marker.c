// A library the sandbox's escape tests load through LD_PRELOAD or LD_AUDIT: wherever it is
// loaded it appends one line to the file TESSERA_PRELOAD_MARK names: the loading process's mount
// namespace and program. A line whose namespace is the host's is an escape: a run's variable
// reached a process outside its sandbox.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void Mark(const char* how) {
  const char* path = getenv("TESSERA_PRELOAD_MARK");
  if (path == NULL) return;
  char ns[128] = "?", exe[512] = "?", line[800];
  ssize_t n = readlink("/proc/self/ns/mnt", ns, sizeof ns - 1);
  if (n > 0) ns[n] = '\0';
  n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) exe[n] = '\0';
  const int len = snprintf(line, sizeof line, "%s %s %s\n", ns, how, exe);
  const int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return;
  if (write(fd, line, (size_t)len) < 0) {
    // nothing to do: the test sees no line
  }
  close(fd);
}

__attribute__((constructor)) static void Loaded(void) { Mark("preload"); }

// What makes it an audit library too (LD_AUDIT).
unsigned int la_version(unsigned int version) {
  Mark("audit");
  return version;
}
