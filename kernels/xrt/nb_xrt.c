/* nb_xrt: probes an XRT device from a child process so an abort inside XRT
 * (std::terminate on a C++ exception crossing the C API) cannot take the worker down. */
#include "nb_xrt.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef NB_HAVE_XRT
#include <xrt/xrt_device.h>
#endif

int nb_xrt_built(void)
{
#ifdef NB_HAVE_XRT
    return 1;
#else
    return 0;
#endif
}

#ifdef NB_HAVE_XRT
/* Runs in the child: open, describe, close, report through the pipe. */
static void probe_child(unsigned index, int fd)
{
    char msg[256];
    xrtDeviceHandle h = xrtDeviceOpen(index);
    if (!h) {
        snprintf(msg, sizeof msg, "E xrtDeviceOpen(%u) failed: %s", index, strerror(errno));
    } else {
        snprintf(msg, sizeof msg, "O XRT device %u opened", index);
        xrtDeviceClose(h);
    }
    ssize_t w = write(fd, msg, strlen(msg));
    (void)w;
    _exit(0);
}
#endif

nb_code nb_xrt_probe(unsigned index, char *info, size_t cap, nb_err *err)
{
    if (cap)
        info[0] = '\0';
#ifndef NB_HAVE_XRT
    (void)index;
    return nb_err_set(err, NB_EUNAVAIL, "xrt backend: npubench was built without libxrt");
#else
    const char *root = getenv("XILINX_XRT");
    if (!root || !*root)
        return nb_err_set(err, NB_EUNAVAIL,
                          "xrt backend: XILINX_XRT is not set (source the XRT setup script); "
                          "no NPU device available");
    int fds[2];
    if (pipe(fds) != 0)
        return nb_err_set(err, NB_EIO, "xrt backend: pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return nb_err_set(err, NB_EIO, "xrt backend: fork: %s", strerror(errno));
    }
    if (pid == 0) {
        close(fds[0]);
        probe_child(index, fds[1]);
    }
    close(fds[1]);
    char buf[256];
    size_t got = 0;
    ssize_t r;
    while (got < sizeof buf - 1 && (r = read(fds[0], buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)r;
    buf[got] = '\0';
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFSIGNALED(status))
        return nb_err_set(err, NB_EUNAVAIL,
                          "xrt backend: XRT aborted while opening device %u (signal %d: %s); "
                          "no usable NPU device",
                          index, WTERMSIG(status), strsignal(WTERMSIG(status)));
    if (got < 2 || buf[0] != 'O')
        return nb_err_set(err, NB_EUNAVAIL, "xrt backend: device %u: %s", index,
                          got > 2 ? buf + 2 : "probe produced no answer");
    snprintf(info, cap, "%s", buf + 2);
    return NB_OK;
#endif
}
