/* Commit-to-Redis latency probe for jobbuf's benchmark.
 *
 * Each sample: BEGIN; SELECT jobbuf_stage(queue, payload); COMMIT; then, from the moment COMMIT
 * returns (CLOCK_MONOTONIC), BLPOP the queue's Redis list until the job can be popped. The
 * latency is that interval (it includes one Redis round trip, ~30-60 us on loopback).
 *
 *   latency_probe QUEUE KEY REDIS_PORT (--samples N | --seconds S) [--interval-ms I] [--out FILE]
 *
 * Postgres is chosen by PGHOST/PGPORT/PGUSER/PGDATABASE. Prints "n p50_ms p99_ms max_ms" on
 * stdout; with --out, also one line "<unix time ms> <latency us>" per sample, flushed at once,
 * so that a sampler can read the latency of a time window while the probe runs.
 */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static double wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void must(PGconn* pg, PGresult* r, ExecStatusType want, const char* what)
{
    if (PQresultStatus(r) != want) {
        fprintf(stderr, "latency_probe: %s failed: %s", what, PQerrorMessage(pg));
        exit(1);
    }
    PQclear(r);
}

static int cmp_double(const void* a, const void* b)
{
    double x = *(const double*) a, y = *(const double*) b;
    return x < y ? -1 : x > y;
}

int main(int argc, char** argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: latency_probe QUEUE KEY REDIS_PORT (--samples N | --seconds S) [--interval-ms I] [--out FILE]\n");
        return 2;
    }
    const char* queue = argv[1];
    const char* key = argv[2];
    int redis_port = atoi(argv[3]);
    long samples = 0;
    double seconds = 0, interval_ms = 1;
    const char* out_path = NULL;
    for (int i = 4; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--samples")) samples = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--interval-ms")) interval_ms = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--out")) out_path = argv[i + 1];
        else { fprintf(stderr, "latency_probe: unknown option %s\n", argv[i]); return 2; }
    }
    if (samples <= 0 && seconds <= 0) { fprintf(stderr, "latency_probe: give --samples or --seconds\n"); return 2; }

    PGconn* pg = PQconnectdb("");
    if (PQstatus(pg) != CONNECTION_OK) { fprintf(stderr, "latency_probe: %s", PQerrorMessage(pg)); return 1; }
    struct timeval tv = {40, 0};  // connect and read timeout: longer than BLPOP's 30 s
    redisContext* redis = redisConnectWithTimeout("127.0.0.1", redis_port, tv);
    if (redis == NULL || redis->err) { fprintf(stderr, "latency_probe: cannot connect to Redis\n"); return 1; }
    FILE* out = out_path ? fopen(out_path, "a") : NULL;
    if (out_path && !out) { fprintf(stderr, "latency_probe: %s: %s\n", out_path, strerror(errno)); return 1; }

    const char* payload = "{\"class\": \"InvoiceMailer\", \"args\": [1000042, \"customer-42@example.com\", {\"plan\": \"pro\", \"locale\": \"en\"}]}";
    must(pg, PQprepare(pg, "stage", "SELECT jobbuf_stage($1, $2::jsonb)", 2, NULL), PGRES_COMMAND_OK, "prepare");
    freeReplyObject(redisCommand(redis, "DEL %s", key));

    long cap = samples > 0 ? samples : (long) (seconds * 1000.0 / (interval_ms > 0.05 ? interval_ms : 0.05)) + 16;
    double* lat = malloc(sizeof(double) * cap);
    long n = 0;
    double deadline = mono_us() + seconds * 1e6;
    const char* params[2] = {queue, payload};
    for (;;) {
        if (samples > 0 ? n >= samples : (mono_us() >= deadline || n >= cap)) break;
        must(pg, PQexec(pg, "BEGIN"), PGRES_COMMAND_OK, "BEGIN");
        must(pg, PQexecPrepared(pg, "stage", 2, params, NULL, NULL, 0), PGRES_TUPLES_OK, "jobbuf_stage");
        must(pg, PQexec(pg, "COMMIT"), PGRES_COMMAND_OK, "COMMIT");
        double t0 = mono_us();
        // A backlog can hold the job back for long (a held snapshot in the sustained run): keep
        // waiting, so the sample records the real latency, for up to 10 minutes.
        redisReply* r = NULL;
        for (int waits = 0; waits < 20; waits++) {
            r = redisCommand(redis, "BLPOP %s 30", key);
            if (r == NULL || r->type != REDIS_REPLY_NIL)
                break;
            freeReplyObject(r);
            r = NULL;
        }
        double t1 = mono_us();
        if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
            fprintf(stderr, "latency_probe: job did not arrive in %s within 10 minutes\n", key);
            return 1;
        }
        freeReplyObject(r);
        lat[n++] = t1 - t0;
        if (out) { fprintf(out, "%.0f %.1f\n", wall_ms(), t1 - t0); fflush(out); }
        if (interval_ms > 0) {
            struct timespec ts = {(time_t) (interval_ms / 1000), (long) (((long) (interval_ms * 1000) % 1000000) * 1000)};
            nanosleep(&ts, NULL);
        }
    }
    qsort(lat, n, sizeof(double), cmp_double);
    if (n == 0) { printf("0 0 0 0\n"); return 0; }
    long i50 = (long) (0.50 * (n - 1)), i99 = (long) (0.99 * (n - 1));
    printf("%ld %.3f %.3f %.3f\n", n, lat[i50] / 1000, lat[i99] / 1000, lat[n - 1] / 1000);
    return 0;
}
