/* The floor under any proxy that splices: the CPU that the system alone
 * spends to carry connections from a front port to a sink through a
 * process, socket to pipe to socket with splice(2), a thread and a pipe
 * per connection, blocking, with nothing read, paced or decided. No
 * proxy that moves bytes between two TCP sockets can spend less; on
 * loopback each send also carries the receiver's side of TCP, which the
 * system charges to the sender.
 *
 *   cc -O2 -pthread -o splice_floor benches/splice_floor.c
 *   ./splice_floor FRONT SINK CONNECTIONS
 *
 * It listens on 127.0.0.1:FRONT, carries CONNECTIONS clients to
 * 127.0.0.1:SINK (one way, client to sink), and once every one has ended
 * prints its CPU seconds (user + system, from getrusage) on stderr.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

static int sink_port;
/* Every thread waits here before it ends, so that its CPU time is still
 * there to be read while the others finish. */
static pthread_barrier_t all_done;

static int dial(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in at = {.sin_family = AF_INET, .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&at, sizeof at) < 0) {
        perror("connect");
        exit(1);
    }
    return fd;
}

static void *carry(void *arg) {
    int client = (int)(long)arg, sink = dial(sink_port), pipes[2];
    if (pipe(pipes) < 0) {
        perror("pipe");
        exit(1);
    }
    fcntl(pipes[1], F_SETPIPE_SZ, 1 << 20);
    for (;;) {
        ssize_t in = splice(client, NULL, pipes[1], NULL, 1 << 20, SPLICE_F_MOVE);
        if (in <= 0)
            break;
        while (in > 0) {
            ssize_t out = splice(pipes[0], NULL, sink, NULL, in, SPLICE_F_MOVE);
            if (out <= 0) {
                perror("splice");
                exit(1);
            }
            in -= out;
        }
    }
    close(client);
    close(sink);
    pthread_barrier_wait(&all_done);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: splice_floor FRONT SINK CONNECTIONS\n");
        return 2;
    }
    sink_port = atoi(argv[2]);
    int connections = atoi(argv[3]), one = 1;
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in at = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1])),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(listener, (struct sockaddr *)&at, sizeof at) < 0 || listen(listener, 128) < 0) {
        perror("listen");
        return 1;
    }
    pthread_t *threads = calloc(connections, sizeof *threads);
    pthread_barrier_init(&all_done, NULL, connections);
    for (int i = 0; i < connections; i++) {
        int client = accept(listener, NULL, NULL);
        if (client < 0) {
            perror("accept");
            return 1;
        }
        pthread_create(&threads[i], NULL, carry, (void *)(long)client);
    }
    for (int i = 0; i < connections; i++)
        pthread_join(threads[i], NULL);
    struct rusage used;
    getrusage(RUSAGE_SELF, &used);
    fprintf(stderr, "%.3f\n", used.ru_utime.tv_sec + used.ru_utime.tv_usec / 1e6 +
                                  used.ru_stime.tv_sec + used.ru_stime.tv_usec / 1e6);
    return 0;
}
