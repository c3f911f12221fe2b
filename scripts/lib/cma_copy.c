// Cross-memory attach (process_vm_readv) against memcpy, on this machine:
// 64 MiB read from a child process in chunks of CHUNK_KIB, PASSES times,
// then the same bytes by memcpy within this process. The measurement
// behind docs/history/torch-wire-2026-12-06-2a9ad40.md's "one copy a byte".
//   cc -O2 -o /tmp/cma_copy scripts/lib/cma_copy.c && /tmp/cma_copy 1024 10
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s CHUNK_KIB PASSES\n", argv[0]);
        return 2;
    }
    const size_t len = (size_t)atoi(argv[1]) << 10, total = (size_t)64 << 20;
    const int passes = atoi(argv[2]);
    if (len == 0 || total % len != 0 || passes <= 0) {
        fprintf(stderr, "CHUNK_KIB must divide 65536, PASSES > 0\n");
        return 2;
    }
    unsigned char* src = malloc(total);
    unsigned char* dst = malloc(total);
    memset(src, 1, total);
    memset(dst, 2, total);
    const pid_t child = fork(); // the same src at the same address in the child
    if (child == 0) {
        pause();
        return 0;
    }
    const double t0 = now();
    for (int i = 0; i < passes; i++)
        for (size_t off = 0; off < total; off += len) {
            struct iovec l = {dst + off, len}, r = {src + off, len};
            if (process_vm_readv(child, &l, 1, &r, 1, 0) != (ssize_t)len) {
                perror("process_vm_readv");
                kill(child, SIGKILL);
                return 1;
            }
        }
    const double t1 = now();
    for (int i = 0; i < passes; i++)
        for (size_t off = 0; off < total; off += len)
            memcpy(dst + off, src + off, len);
    const double t2 = now();
    kill(child, SIGKILL);
    const double bytes = (double)total * passes;
    printf("chunk %zu KiB: process_vm_readv %.2f GB/s, memcpy %.2f GB/s\n", len >> 10, bytes / (t1 - t0) / 1e9,
           bytes / (t2 - t1) / 1e9);
    return 0;
}
