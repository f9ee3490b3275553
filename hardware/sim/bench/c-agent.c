/* The minimal C agent of the side-by-side benchmark (issue 12): what parkwise-agent is measured against.
 * One GPIO line, both edges, event-driven (libgpiod 1.6, no filter), and per edge one QoS 1 publish. One thread:
 * a poll on the line's fd and libmosquitto's socket (POLLOUT only while mosquitto_want_write), so it sleeps until an
 * edge, a packet or the keepalive. No durability, no debounce, no state: the floor of "edge -> broker" here.
 *
 *   c-agent CHIP OFFSET HOST PORT TOPIC_PREFIX
 * publishes a retained "online" to TOPIC_PREFIX/status once connected, then per edge to TOPIC_PREFIX/events:
 *   {"seq":N,"value":0|1,"ns":KERNEL_TIMESTAMP}
 * Stops on SIGTERM/SIGINT. Build: gcc -O2 c-agent.c -lgpiod -lmosquitto
 */
#include <gpiod.h>
#include <mosquitto.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEEPALIVE 30   /* seconds, as parkwise-agent's default */

static volatile sig_atomic_t stopping;
static void on_signal(int sig) { (void)sig; stopping = 1; }

static void on_connect(struct mosquitto *mosq, void *topic, int rc) {
    if (rc == 0)
        mosquitto_publish(mosq, NULL, (const char *)topic, 6, "online", 1, true);
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: c-agent CHIP OFFSET HOST PORT TOPIC_PREFIX\n");
        return 64;
    }
    char status[256], events[256], payload[128];
    snprintf(status, sizeof status, "%s/status", argv[5]);
    snprintf(events, sizeof events, "%s/events", argv[5]);

    struct sigaction sa = { .sa_handler = on_signal };   /* no SA_RESTART: poll returns EINTR */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    struct gpiod_chip *chip = gpiod_chip_open_lookup(argv[1]);
    struct gpiod_line *line = chip ? gpiod_chip_get_line(chip, (unsigned)atoi(argv[2])) : NULL;
    if (!line || gpiod_line_request_both_edges_events(line, "c-agent") < 0) {
        fprintf(stderr, "c-agent: cannot request %s line %s: %s\n", argv[1], argv[2], strerror(errno));
        return 1;
    }

    mosquitto_lib_init();
    struct mosquitto *mosq = mosquitto_new("c-agent", true, status);
    if (!mosq) { perror("mosquitto_new"); return 1; }
    mosquitto_connect_callback_set(mosq, on_connect);
    mosquitto_will_set(mosq, status, 7, "offline", 1, true);
    if (mosquitto_connect(mosq, argv[3], atoi(argv[4]), KEEPALIVE) != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "c-agent: cannot reach %s:%s\n", argv[3], argv[4]);
        return 1;
    }

    unsigned long seq = 0;
    struct pollfd fds[2] = { { .fd = gpiod_line_event_get_fd(line), .events = POLLIN } };
    while (!stopping) {
        fds[1].fd = mosquitto_socket(mosq);
        fds[1].events = POLLIN | (mosquitto_want_write(mosq) ? POLLOUT : 0);
        if (poll(fds, 2, KEEPALIVE * 1000 / 2) < 0) continue;   /* EINTR on a stop signal */
        if (fds[0].revents & POLLIN) {
            struct gpiod_line_event ev;
            if (gpiod_line_event_read(line, &ev) == 0) {
                int n = snprintf(payload, sizeof payload, "{\"seq\":%lu,\"value\":%d,\"ns\":%lld}", ++seq,
                                 ev.event_type == GPIOD_LINE_EVENT_RISING_EDGE,
                                 (long long)ev.ts.tv_sec * 1000000000LL + ev.ts.tv_nsec);
                mosquitto_publish(mosq, NULL, events, n, payload, 1, false);   /* written at once: not threaded */
            }
        }
        int rc = MOSQ_ERR_SUCCESS;
        if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) rc = mosquitto_loop_read(mosq, 1);
        if (rc == MOSQ_ERR_SUCCESS && (fds[1].revents & POLLOUT)) rc = mosquitto_loop_write(mosq, 1);
        if (rc == MOSQ_ERR_SUCCESS) rc = mosquitto_loop_misc(mosq);             /* keepalive, when due */
        if (rc != MOSQ_ERR_SUCCESS && !stopping) mosquitto_reconnect(mosq);
    }

    mosquitto_publish(mosq, NULL, status, 7, "offline", 1, true);
    mosquitto_disconnect(mosq);
    gpiod_line_release(line);
    gpiod_chip_close(chip);
    mosquitto_destroy(mosq);
    mosquitto_lib_cleanup();
    return 0;
}
