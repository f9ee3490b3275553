/* The in-guest measuring tool of the side-by-side benchmark (issue 12). Figures only, never a verdict.
 *
 *   probe lat N GAP_MS TARGET...      drive N edges on each target, alternating between targets, and time each
 *                                      edge (the write to gpio-sim's pull attribute) to its MQTT message arriving
 *                                      here; after each message a pause of GAP_MS plus a random 0..GAP_MS (so the
 *                                      edges do not fall in step with any periodic timer). Also the target
 *                                      process's CPU (schedstat ns and switches of the threads alive at the end;
 *                                      utime+stime ticks of the whole process, and its stime alone) over the run, per edge.
 *        TARGET = NAME,PID,PULL_PATH,TOPIC,MATCH   (MATCH: a substring the edge's message payload contains)
 *   probe burst N GAP_US TARGET       N edges GAP_US apart without waiting for messages (a burst: what a group
 *                                      commit is for), then the time until the last of the N messages.
 *   probe spawn FILTER LOG -- PROGRAM ARGS...   subscribe to FILTER, start PROGRAM (output to LOG), and time the
 *                                      start to its first message; leaves it running and prints its pid.
 *   probe idle SECONDS NAME,PID...     voluntary context switches per thread over SECONDS of nothing happening.
 *   probe threads PID                  the threads' CPU and switches so far (one line per thread).
 * All times are CLOCK_MONOTONIC in this one process, so driver and subscriber share a clock. Broker: 127.0.0.1:1883.
 * Build: gcc -O2 probe.c -lmosquitto -lpthread
 */
#define _GNU_SOURCE
#include <mosquitto.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_TARGETS 4
#define MAX_THREADS 64

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
static void sleep_ns(long long ns) {
    struct timespec ts = { ns / 1000000000LL, ns % 1000000000LL };
    while (nanosleep(&ts, &ts) != 0) {}
}

/* --- process figures: every thread of a pid ------------------------------------------------------------------- */
struct thread_fig { int tid; char comm[32]; long long run_ns, ticks, vcsw, nvcsw; };
struct proc_fig { int n; struct thread_fig t[MAX_THREADS]; long long proc_ticks, proc_sticks, rss_kb, hwm_kb; };
/* what the threads alive at the end did since a (a thread born since counts from 0; one that ended is not seen) */
struct usage { long long run_ns, ticks, vcsw, nvcsw; };

static int read_file(const char *path, char *buf, size_t size) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n < 0) return -1;
    buf[n] = 0;
    return (int)n;
}
static long long field_kb(const char *status, const char *key) {
    const char *p = strstr(status, key);
    return p ? atoll(p + strlen(key)) : -1;
}
/* utime + stime of a stat line: fields 14 and 15, counted after the ")" that ends the command name; stime alone
   (the time spent in the kernel, system calls above all) in *kernel when given */
static long long stat_ticks_split(const char *stat, long long *kernel) {
    const char *p = strrchr(stat, ')');
    for (int field = 2; field < 14 && p; field++) p = strchr(p + 1, ' ');
    long long ut = 0, st = 0;
    if (p) sscanf(p + 1, "%lld %lld", &ut, &st);
    if (kernel) *kernel = st;
    return ut + st;
}
static long long stat_ticks(const char *stat) { return stat_ticks_split(stat, NULL); }
static void proc_figures(int pid, struct proc_fig *f) {
    char path[128], buf[4096];
    memset(f, 0, sizeof *f);
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    if (read_file(path, buf, sizeof buf) > 0) {
        f->rss_kb = field_kb(buf, "VmRSS:");
        f->hwm_kb = field_kb(buf, "VmHWM:");
    }
    snprintf(path, sizeof path, "/proc/%d/stat", pid);   /* the process's utime+stime: ended threads included */
    if (read_file(path, buf, sizeof buf) > 0) f->proc_ticks = stat_ticks_split(buf, &f->proc_sticks);
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *dir = opendir(path);
    if (!dir) return;
    struct dirent *e;
    while ((e = readdir(dir)) && f->n < MAX_THREADS) {
        if (e->d_name[0] == '.') continue;
        struct thread_fig *t = &f->t[f->n];
        t->tid = atoi(e->d_name);
        snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", pid, t->tid);
        if (read_file(path, buf, sizeof buf) > 0) t->run_ns = atoll(buf);
        snprintf(path, sizeof path, "/proc/%d/task/%d/stat", pid, t->tid);
        if (read_file(path, buf, sizeof buf) > 0) {
            char *open_paren = strchr(buf, '('), *close_paren = strrchr(buf, ')');
            if (open_paren && close_paren) {
                size_t len = (size_t)(close_paren - open_paren - 1);
                if (len >= sizeof t->comm) len = sizeof t->comm - 1;
                memcpy(t->comm, open_paren + 1, len);
            }
            t->ticks = stat_ticks(buf);
        }
        snprintf(path, sizeof path, "/proc/%d/task/%d/status", pid, t->tid);
        if (read_file(path, buf, sizeof buf) > 0) {
            t->vcsw = field_kb(buf, "\nvoluntary_ctxt_switches:");
            t->nvcsw = field_kb(buf, "nonvoluntary_ctxt_switches:");
        }
        f->n++;
    }
    closedir(dir);
}
static const struct thread_fig *find_thread(const struct proc_fig *f, int tid) {
    for (int i = 0; i < f->n; i++) if (f->t[i].tid == tid) return &f->t[i];
    return NULL;
}
static struct usage since(const struct proc_fig *a, const struct proc_fig *b) {
    struct usage u = {0};
    for (int i = 0; i < b->n; i++) {
        const struct thread_fig *t = &b->t[i], *t0 = find_thread(a, t->tid);
        u.run_ns += t->run_ns - (t0 ? t0->run_ns : 0);
        u.ticks += t->ticks - (t0 ? t0->ticks : 0);
        u.vcsw += t->vcsw - (t0 ? t0->vcsw : 0);
        u.nvcsw += t->nvcsw - (t0 ? t0->nvcsw : 0);
    }
    return u;
}

/* --- the subscriber ------------------------------------------------------------------------------------------------- */
struct target {
    const char *name, *pull, *topic, *match;
    int pid;
    long long count, last_rx;
};
static struct target targets[MAX_TARGETS];
static int n_targets;
static const char *spawn_filter;           /* spawn: any message on this filter */
static long long spawn_rx;
static long long subscribed;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;

static void on_message(struct mosquitto *m, void *ud, const struct mosquitto_message *msg) {
    (void)m; (void)ud;
    long long rx = now_ns();
    pthread_mutex_lock(&lock);
    if (spawn_filter) {
        bool hit = false;
        mosquitto_topic_matches_sub(spawn_filter, msg->topic, &hit);
        if (hit && !msg->retain && spawn_rx == 0) spawn_rx = rx;
    }
    for (int i = 0; i < n_targets; i++) {
        struct target *t = &targets[i];
        if (strcmp(msg->topic, t->topic) == 0 && msg->payload && memmem(msg->payload, (size_t)msg->payloadlen, t->match, strlen(t->match))) {
            t->count++;
            t->last_rx = rx;
        }
    }
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}
static void on_subscribe(struct mosquitto *m, void *ud, int mid, int n, const int *qos) {
    (void)m; (void)ud; (void)mid; (void)n; (void)qos;
    pthread_mutex_lock(&lock);
    subscribed++;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}
/* waits (lock held) until *value > floor or the deadline passes; 0 on success */
static int wait_above(const long long *value, long long floor, long long deadline_ns) {
    while (*value <= floor) {
        long long left = deadline_ns - now_ns();
        if (left <= 0) return -1;
        struct timespec abs;
        clock_gettime(CLOCK_MONOTONIC, &abs);
        long long at = abs.tv_sec * 1000000000LL + abs.tv_nsec + (left > 100000000 ? 100000000 : left);
        abs.tv_sec = at / 1000000000LL; abs.tv_nsec = at % 1000000000LL;
        pthread_cond_timedwait(&changed, &lock, &abs);
    }
    return 0;
}
static struct mosquitto *subscribe(const char **filters, int n) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&changed, &attr);
    mosquitto_lib_init();
    struct mosquitto *m = mosquitto_new(NULL, true, NULL);
    mosquitto_message_callback_set(m, on_message);
    mosquitto_subscribe_callback_set(m, on_subscribe);
    if (mosquitto_connect(m, "127.0.0.1", 1883, 60) != MOSQ_ERR_SUCCESS || mosquitto_loop_start(m) != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "probe: no broker on 127.0.0.1:1883\n");
        exit(1);
    }
    for (int i = 0; i < n; i++) mosquitto_subscribe(m, NULL, filters[i], 0);
    pthread_mutex_lock(&lock);
    int rc = wait_above(&subscribed, n - 1, now_ns() + 10000000000LL);
    pthread_mutex_unlock(&lock);
    if (rc != 0) { fprintf(stderr, "probe: subscription not acknowledged\n"); exit(1); }
    return m;
}

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}
static double pct(const long long *sorted, int n, double p) { return n ? sorted[(int)((n - 1) * p)] / 1e6 : -1; }

/* NAME,PID,PULL_PATH,TOPIC,MATCH arguments into targets[]; their topics into filters; -1 on a bad one */
static int parse_targets(int argc, char **argv, const char **filters) {
    for (int i = 0; i < argc && n_targets < MAX_TARGETS; i++) {
        struct target *t = &targets[n_targets];
        char *s = strdup(argv[i]);
        t->name = strsep(&s, ","); t->pid = atoi(strsep(&s, ",") ?: "0");
        t->pull = strsep(&s, ","); t->topic = strsep(&s, ","); t->match = s;
        if (!t->pull || !t->topic || !t->match) { fprintf(stderr, "probe: bad target %s\n", argv[i]); return -1; }
        filters[n_targets++] = t->topic;
    }
    return 0;
}
static int pull(const char *path, int up) {
    int fd = open(path, O_WRONLY);
    if (fd < 0) { perror(path); return -1; }
    const char *v = up ? "pull-up" : "pull-down";
    ssize_t w = write(fd, v, strlen(v));
    close(fd);
    if (w < 0) { perror(path); return -1; }
    return 0;
}

/* burst N GAP_US TARGET: N edges GAP_US apart without waiting, then until all N messages came (or 5 s of none) */
static int cmd_burst(int argc, char **argv) {
    const char *filters[MAX_TARGETS];
    if (argc != 3 || parse_targets(1, argv + 2, filters) != 0) return 64;
    int n = atoi(argv[0]);
    long long gap = atoll(argv[1]) * 1000LL;
    struct target *t = &targets[0];
    struct mosquitto *m = subscribe(filters, 1);
    static struct proc_fig before, after;
    proc_figures(t->pid, &before);
    pthread_mutex_lock(&lock);
    long long base = t->count;
    pthread_mutex_unlock(&lock);
    long long start = now_ns();
    for (int i = 0; i < n; i++) {
        if (pull(t->pull, i % 2 == 0) != 0) return 1;
        if (gap) sleep_ns(gap);
    }
    long long written = now_ns();
    pthread_mutex_lock(&lock);
    for (long long seen = t->count; t->count < base + n; seen = t->count)
        if (wait_above(&t->count, seen, now_ns() + 5000000000LL) != 0) break;
    long long got = t->count - base, last = t->last_rx;
    pthread_mutex_unlock(&lock);
    proc_figures(t->pid, &after);
    struct usage u = since(&before, &after);
    printf("burst %s edges=%d got=%lld write_ms=%.1f last_ms=%.1f cpu_ms_per_edge=%.4f\n", t->name, n, got,
           (written - start) / 1e6, got ? (last - start) / 1e6 : -1.0, u.run_ns / 1e6 / n);
    mosquitto_disconnect(m);
    mosquitto_loop_stop(m, false);
    return 0;
}

static int cmd_lat(int argc, char **argv) {
    if (argc < 3) return 64;
    int n = atoi(argv[0]);
    long long gap = atoll(argv[1]) * 1000000LL;
    const char *filters[MAX_TARGETS];
    if (parse_targets(argc - 2, argv + 2, filters) != 0) return 64;
    struct mosquitto *m = subscribe(filters, n_targets);
    static struct proc_fig before[MAX_TARGETS], after[MAX_TARGETS];
    long long *lat[MAX_TARGETS];
    int *edge_of[MAX_TARGETS];   /* which edge (0-based, per target) each latency belongs to */
    int got[MAX_TARGETS] = {0}, lost[MAX_TARGETS] = {0}, level[MAX_TARGETS] = {0};
    for (int k = 0; k < n_targets; k++) {
        lat[k] = calloc((size_t)n, sizeof(long long));
        edge_of[k] = calloc((size_t)n, sizeof(int));
        proc_figures(targets[k].pid, &before[k]);
    }
    srand((unsigned)now_ns());
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < n_targets; k++) {
            struct target *t = &targets[k];
            level[k] = !level[k];
            pthread_mutex_lock(&lock);
            long long base = t->count;
            pthread_mutex_unlock(&lock);
            long long sent = now_ns();
            if (pull(t->pull, level[k]) != 0) return 1;
            pthread_mutex_lock(&lock);
            if (wait_above(&t->count, base, sent + 5000000000LL) == 0) { edge_of[k][got[k]] = i; lat[k][got[k]++] = t->last_rx - sent; }
            else lost[k]++;
            pthread_mutex_unlock(&lock);
            sleep_ns(gap + (gap ? rand() % gap : 0));
        }
    }
    for (int k = 0; k < n_targets; k++) {
        proc_figures(targets[k].pid, &after[k]);
        /* the three slowest edges, which of them and how slow (before sorting loses which is which) */
        char slow[96] = "";
        for (int r = 0; r < 3 && r < got[k]; r++) {
            int worst = -1;
            for (int i = 0; i < got[k]; i++)
                if (edge_of[k][i] >= 0 && (worst < 0 || lat[k][i] > lat[k][worst])) worst = i;
            size_t used = strlen(slow);
            snprintf(slow + used, sizeof slow - used, "%s%d:%.1f", r ? "," : "", edge_of[k][worst], lat[k][worst] / 1e6);
            edge_of[k][worst] = -1 - edge_of[k][worst];   /* taken; restored below */
        }
        for (int i = 0; i < got[k]; i++) if (edge_of[k][i] < 0) edge_of[k][i] = -1 - edge_of[k][i];
        qsort(lat[k], (size_t)got[k], sizeof(long long), cmp_ll);
        double sum = 0;
        for (int i = 0; i < got[k]; i++) sum += lat[k][i] / 1e6;
        int edges = n;
        struct usage u = since(&before[k], &after[k]);
        printf("lat %s edges=%d got=%d lost=%d p50_ms=%.3f p99_ms=%.3f max_ms=%.3f mean_ms=%.3f "
               "cpu_ms_per_edge=%.4f ticks_per_edge=%.4f kernel_ticks_per_edge=%.4f vcsw_per_edge=%.2f nvcsw_per_edge=%.2f "
               "rss_kb=%lld hwm_kb=%lld threads=%d slowest_edges=%s\n",
               targets[k].name, edges, got[k], lost[k], pct(lat[k], got[k], 0.50), pct(lat[k], got[k], 0.99),
               pct(lat[k], got[k], 1.0), got[k] ? sum / got[k] : -1, u.run_ns / 1e6 / edges,
               (double)(after[k].proc_ticks - before[k].proc_ticks) / edges,
               (double)(after[k].proc_sticks - before[k].proc_sticks) / edges, (double)u.vcsw / edges,
               (double)u.nvcsw / edges, after[k].rss_kb, after[k].hwm_kb, after[k].n, slow);
    }
    mosquitto_disconnect(m);
    mosquitto_loop_stop(m, false);
    return 0;
}

static int cmd_spawn(int argc, char **argv) {
    if (argc < 4 || strcmp(argv[2], "--") != 0) return 64;
    spawn_filter = argv[0];
    const char *filters[1] = { argv[0] };
    struct mosquitto *m = subscribe(filters, 1);
    long long start = now_ns();
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) { dup2(fd, 1); dup2(fd, 2); close(fd); }
        setsid();
        execv(argv[3], argv + 3);
        _exit(127);
    }
    pthread_mutex_lock(&lock);
    int rc = wait_above(&spawn_rx, 0, start + 60000000000LL);
    long long rx = spawn_rx;
    pthread_mutex_unlock(&lock);
    if (rc == 0) printf("spawn pid=%d first_publish_ms=%.3f\n", pid, (rx - start) / 1e6);
    else printf("spawn pid=%d first_publish_ms=none\n", pid);
    mosquitto_disconnect(m);
    mosquitto_loop_stop(m, false);
    return rc == 0 ? 0 : 1;
}

static void print_threads(const char *what, const struct proc_fig *a, const struct proc_fig *b, double seconds) {
    for (int i = 0; i < b->n; i++) {
        const struct thread_fig *t = &b->t[i], *t0 = a ? find_thread(a, t->tid) : NULL;
        if (a) printf("%s tid=%d comm=%s vcsw=%lld nvcsw=%lld per_s=%.3f cpu_ms=%.3f\n", what, t->tid, t->comm,
                      t->vcsw - (t0 ? t0->vcsw : 0), t->nvcsw - (t0 ? t0->nvcsw : 0),
                      (t->vcsw - (t0 ? t0->vcsw : 0)) / seconds, (t->run_ns - (t0 ? t0->run_ns : 0)) / 1e6);
        else printf("%s tid=%d comm=%s vcsw=%lld nvcsw=%lld cpu_ms=%.3f ticks=%lld\n", what, t->tid, t->comm,
                    t->vcsw, t->nvcsw, t->run_ns / 1e6, t->ticks);
    }
}

static int cmd_idle(int argc, char **argv) {
    if (argc < 2) return 64;
    double seconds = atof(argv[0]);
    int n = argc - 1 < MAX_TARGETS ? argc - 1 : MAX_TARGETS;
    static struct proc_fig a[MAX_TARGETS], b[MAX_TARGETS];
    const char *name[MAX_TARGETS];
    int pid[MAX_TARGETS];
    for (int k = 0; k < n; k++) {              /* NAME,PID */
        char *s = strdup(argv[1 + k]);
        name[k] = strsep(&s, ",");
        pid[k] = atoi(s ? s : "0");
        proc_figures(pid[k], &a[k]);
    }
    long long t0 = now_ns();
    sleep_ns((long long)(seconds * 1e9));
    double took = (now_ns() - t0) / 1e9;
    for (int k = 0; k < n; k++) {
        proc_figures(pid[k], &b[k]);
        char what[64];
        snprintf(what, sizeof what, "idle-thread %s", name[k]);
        print_threads(what, &a[k], &b[k], took);
        struct usage u = since(&a[k], &b[k]);
        printf("idle %s seconds=%.1f vcsw=%lld per_s=%.3f nvcsw=%lld cpu_ms=%.3f ticks=%lld threads=%d\n", name[k], took,
               u.vcsw, u.vcsw / took, u.nvcsw, u.run_ns / 1e6, b[k].proc_ticks - a[k].proc_ticks, b[k].n);
    }
    return 0;
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    int rc = 64;
    if (argc >= 2 && strcmp(argv[1], "lat") == 0) rc = cmd_lat(argc - 2, argv + 2);
    else if (argc >= 2 && strcmp(argv[1], "burst") == 0) rc = cmd_burst(argc - 2, argv + 2);
    else if (argc >= 2 && strcmp(argv[1], "spawn") == 0) rc = cmd_spawn(argc - 2, argv + 2);
    else if (argc >= 2 && strcmp(argv[1], "idle") == 0) rc = cmd_idle(argc - 2, argv + 2);
    else if (argc == 3 && strcmp(argv[1], "threads") == 0) {
        static struct proc_fig f;
        proc_figures(atoi(argv[2]), &f);
        print_threads("thread", NULL, &f, 0);
        printf("rss_kb=%lld hwm_kb=%lld ticks=%lld\n", f.rss_kb, f.hwm_kb, f.proc_ticks);
        rc = 0;
    }
    if (rc == 64) fprintf(stderr, "usage: probe lat N GAP_MS NAME,PID,PULL,TOPIC,MATCH... | burst N GAP_US TARGET | spawn FILTER LOG -- PROGRAM ARGS... | idle SECONDS NAME,PID... | threads PID\n");
    return rc;
}
