/* The floor under any proxy of many slow connections: the CPU that the
 * system alone spends to send N connections' bytes at RATE each over
 * loopback, a CHUNK at a time, with nothing read, paced or decided.
 * Every chunk a proxy forwards costs at least this send; on loopback the
 * send also carries the receiver's side of TCP, which the system charges
 * to the sender.
 *
 *   cc -O2 -o send_floor benches/send_floor.c
 *   ./send_floor N RATE CHUNK SECONDS
 *
 * A child process is the sink (it reads and discards, on its own CPU);
 * the parent wakes every millisecond and sends each connection's due
 * chunks, then prints its own CPU seconds (user + system, from getrusage).
 */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: send_floor N RATE CHUNK SECONDS\n");
        return 2;
    }
    int n = atoi(argv[1]);
    double rate = atof(argv[2]), seconds = atof(argv[4]);
    int chunk = atoi(argv[3]);
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in at = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof at;
    if (bind(listener, (void *)&at, len) || listen(listener, 4096) ||
        getsockname(listener, (void *)&at, &len)) {
        perror("listen");
        return 1;
    }
    pid_t sink = fork();
    if (sink == 0) {
        int poll = epoll_create1(0);
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = listener}, got[256];
        epoll_ctl(poll, EPOLL_CTL_ADD, listener, &ev);
        static char buffer[1 << 16];
        for (;;) {
            int ready = epoll_wait(poll, got, 256, -1);
            for (int i = 0; i < ready; i++) {
                int fd = got[i].data.fd;
                if (fd == listener) {
                    struct epoll_event in = {.events = EPOLLIN};
                    in.data.fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK);
                    epoll_ctl(poll, EPOLL_CTL_ADD, in.data.fd, &in);
                } else if (read(fd, buffer, sizeof buffer) <= 0) {
                    close(fd);
                }
            }
        }
    }
    int *fds = calloc(n, sizeof *fds);
    for (int i = 0; i < n; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        setsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(fds[i], (void *)&at, len)) {
            perror("connect");
            return 1;
        }
    }
    static char data[1 << 20];
    double *each = calloc(n, sizeof *each), start = now(), sent = 0;
    double total = rate * seconds * n;
    while (sent < total) {
        struct timespec tick = {0, 1000000};
        nanosleep(&tick, NULL);
        /* Every connection is owed rate * elapsed; send whole chunks. */
        double owed = rate * (now() - start);
        for (int i = 0; i < n; i++) {
            while (each[i] + chunk <= owed && sent < total) {
                if (write(fds[i], data, chunk) != chunk) {
                    perror("write");
                    return 1;
                }
                each[i] += chunk;
                sent += chunk;
            }
        }
    }
    struct rusage used;
    getrusage(RUSAGE_SELF, &used);
    printf("| floor | %d | %.2f s | %.2f | chunk %d B, %.0f B/s each |\n", n, now() - start,
           used.ru_utime.tv_sec + used.ru_utime.tv_usec / 1e6 + used.ru_stime.tv_sec +
               used.ru_stime.tv_usec / 1e6,
           chunk, rate);
    kill(sink, SIGKILL);
    waitpid(sink, NULL, 0);
    return 0;
}
