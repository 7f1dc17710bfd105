// Postgres regime: the jobbuf.* GUCs (postgresql.conf) and their validation.
#pragma once
#include "pg_includes.h"

#include "redis/drain_session.h"

// The jobbuf.redis_* settings are suset: postgresql.conf, or per database with ALTER DATABASE ...
// SET by a superuser (that database's worker only; see launcher/database_settings.h).
// jobbuf.database (postmaster) is jobbuf_database, declared in database_list.h.
extern int jobbuf_max_workers;            // jobbuf.max_workers (postmaster)
// jobbuf.redis_url (suset, superuser-only): the text shown, its password masked
// ("redis://user:********@host/0") for every role; the worker connects with the URL as written,
// which only redis_session_settings gives.
extern char* jobbuf_redis_url;
extern char* jobbuf_redis_password_file;  // jobbuf.redis_password_file (suset, superuser-only)
extern int jobbuf_batch_size;             // jobbuf.batch_size
extern int jobbuf_batch_max_bytes;        // jobbuf.batch_max_bytes, bytes
extern int jobbuf_poll_interval;          // jobbuf.poll_interval, milliseconds
extern int jobbuf_redis_timeout;          // jobbuf.redis_timeout, milliseconds (suset)
extern bool jobbuf_enabled;               // jobbuf.enabled
// jobbuf.rotation_min_size (sighup), pages: -1 the built-in rule of storage_rotation.cpp; else the
// heap size from which rotation of jobbuf.jobs and jobbuf.queue_stats is due (tests force one).
extern int jobbuf_rotation_min_size;
// Production Redis (suset; the files superuser-only): TLS, Sentinel, replica acknowledgement.
extern int jobbuf_redis_tls_verify;                // jobbuf.redis_tls_verify: TlsOptions::Verify
extern char* jobbuf_redis_tls_ca_file;             // jobbuf.redis_tls_ca_file
extern char* jobbuf_redis_tls_cert_file;           // jobbuf.redis_tls_cert_file
extern char* jobbuf_redis_tls_key_file;            // jobbuf.redis_tls_key_file
extern char* jobbuf_redis_sentinel_password_file;  // jobbuf.redis_sentinel_password_file
extern int jobbuf_redis_min_replicas;              // jobbuf.redis_min_replicas
// Flow control (suset): the Redis memory guard (redis/memory_guard.h) and its eviction check.
extern char* jobbuf_redis_memory_limit;       // jobbuf.redis_memory_limit: off, a fraction, a size
extern bool jobbuf_redis_require_noeviction;  // jobbuf.redis_require_noeviction

void jobbuf_define_settings(void);

// Reads the Redis password from jobbuf.redis_password_file into buf (first line, without its end
// of line). Returns false with a reason in error when the file cannot be read; true with an
// empty buf when no file is configured.
bool read_redis_password(char* buf, size_t len, char* error, size_t error_len);

// The same for jobbuf.redis_sentinel_password_file.
bool read_sentinel_password(char* buf, size_t len, char* error, size_t error_len);

// The jobbuf.redis_* settings for the worker's drain session (its session with Redis), with the
// passwords the caller read (empty: none); every pointer stays valid until the next configuration
// reload.
jobbuf::redis::SessionSettings redis_session_settings(const char* password, const char* sentinel_password,
                                                      const char* client_name);
