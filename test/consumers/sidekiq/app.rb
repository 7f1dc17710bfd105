# A tiny, real Sidekiq application used by jobbuf's end-to-end tests (test/e2e/sidekiq_each.sh).
# It runs under the unmodified `sidekiq` executable:
#
#   REDIS_URL=redis://127.0.0.1:PORT/0 JOBBUF_E2E_LOG=/tmp/ran.log \
#     sidekiq -r /abs/path/app.rb -q hard -c 2
#
# Every job that runs appends one JSON line to $JOBBUF_E2E_LOG, holding what Sidekiq itself
# parsed from the job jobbuf pushed (class, jid, args, queue, retry, timestamps) and the time it
# ran, so the test can prove exactly-once execution, routing and scheduling from the outside.
# Only configuration is set here: Sidekiq's own code is used as shipped.
require "json"
require "sidekiq"
require_relative "current_job"

# redis-rb 4.8 warns about Sidekiq 6.4's calling style on every fetch; keep the log readable
# (Sidekiq 7 and later use redis-client, without the Redis constant).
Redis.silence_deprecations = true if defined?(Redis) && Redis.respond_to?(:silence_deprecations=)

module JobbufE2E
  LOG = ENV.fetch("JOBBUF_E2E_LOG")

  def self.record(kind, extra = {})
    job = JobbufCurrentJob.hash
    line = {
      "kind" => kind,
      "ran_at" => Time.now.to_f,
      "class" => job["class"],
      "jid" => job["jid"],
      "args" => job["args"],
      "queue" => job["queue"],
      "retry" => job["retry"],
      "retry_count" => job["retry_count"],
      "created_at" => job["created_at"],
      "enqueued_at" => job["enqueued_at"],
    }.merge(extra)
    File.open(LOG, "a") do |f|
      f.flock(File::LOCK_EX)
      f.puts(JSON.generate(line))
      f.flush
    end
  end
end

Sidekiq.configure_server do |config|
  # The scheduler poller moves due jobs from `schedule` (and `retry`) to their queues. Poll about
  # once a second instead of the default 5 s (and skip the 10 s start-up delay that only applies
  # while the average is computed from the process count).
  # (Sidekiq 6 keeps these in Sidekiq.options; Sidekiq 7+ in the config object itself.)
  options = config.respond_to?(:options) ? config.options : config
  options[:average_scheduled_poll_interval] = 1
  options[:poll_interval_average] = 1
  config.server_middleware { |chain| chain.add JobbufCurrentJob::Middleware }
end

# The job jobbuf's tests stage: {"class": "HardJob", "args": [n]}.
class HardJob
  include Sidekiq::Worker

  def perform(*args)
    JobbufE2E.record("ran")
  end
end

# Fails on purpose: with `retry` set (jobbuf adds `retry: true` when the payload has none),
# Sidekiq puts it in its `retry` sorted set; without it Sidekiq would drop the job silently.
class FailJob
  include Sidekiq::Worker
  # Sidekiq's own retry would run it again 15-25 s after the failure, maybe while the test still
  # checks that it ran once and sits in the retry set: an hour instead.
  sidekiq_retry_in { |_count, _exception| 3600 }

  def perform(*args)
    JobbufE2E.record("failed")
    raise "jobbuf e2e: failing on purpose"
  end
end

# Batch mode (queue option delivery: 'group', class group_class): jobbuf claims a group of jobs and
# pushes one Sidekiq job whose only argument is the group id. The job reads the group through SQL
# and finishes it with jobbuf_complete; on error it hands the group back with jobbuf_fail (jobbuf
# retries it with backoff, then dead-letters it), so it never raises into Sidekiq's own retry.
# A job payload with "fail": true makes the group fail on purpose. Connects with libpq's
# environment (PGHOST, PGPORT, PGUSER, PGDATABASE) or $JOBBUF_DATABASE_URL.
class GroupJob
  include Sidekiq::Worker

  def perform(group_id)
    require "pg"
    conn = ENV["JOBBUF_DATABASE_URL"] ? PG.connect(ENV["JOBBUF_DATABASE_URL"]) : PG.connect
    begin
      rows = conn.exec_params("SELECT id, payload, attempts FROM jobbuf_group($1)", [group_id]).map do |r|
        { "id" => r["id"].to_i, "payload" => JSON.parse(r["payload"]), "attempts" => r["attempts"].to_i }
      end
      JobbufE2E.record("group", "group_id" => group_id, "jobs" => rows)
      raise "jobbuf e2e: group failed on purpose" if rows.any? { |r| r["payload"].is_a?(Hash) && r["payload"]["fail"] }
      conn.exec_params("SELECT jobbuf_complete($1)", [group_id])
    rescue PG::Error
      raise # the database is unreachable: let Sidekiq retry the delivery of the group id
    rescue StandardError => e
      conn.exec_params("SELECT jobbuf_fail($1, $2)", [group_id, "#{e.class}: #{e.message}"])
    ensure
      conn.close
    end
  end
end

# Batch mode, a consumer that "crashes" once (test/e2e/sidekiq_group.sh): the first time it is
# handed a group holding a job it has never seen, it records the delivery and returns WITHOUT
# completing or failing the group, as a consumer killed mid-way would. The lease then expires and
# jobbuf's worker claims the jobs again under a new group id and pushes a new Sidekiq job. On that
# later delivery it first plays the stale consumer (jobbuf_complete / jobbuf_group on the group id
# it abandoned: both must find nothing, the group id being a fencing token), then completes the
# new group. Which jobs it has seen (and under which group) lives in Redis, hash
# jobbuf_e2e:crash_once (job id -> first group id), so the memory survives thread switches.
class CrashOnceGroupJob
  include Sidekiq::Worker

  SEEN = "jobbuf_e2e:crash_once".freeze

  def perform(group_id)
    require "pg"
    conn = ENV["JOBBUF_DATABASE_URL"] ? PG.connect(ENV["JOBBUF_DATABASE_URL"]) : PG.connect
    begin
      rows = conn.exec_params(
        "SELECT g.id, g.payload, g.attempts, j.last_error FROM jobbuf_group($1) g" \
        " LEFT JOIN jobbuf.jobs j ON j.id = g.id", [group_id]).map do |r|
        { "id" => r["id"].to_i, "payload" => JSON.parse(r["payload"]), "attempts" => r["attempts"].to_i,
          "last_error" => r["last_error"] }
      end
      if rows.empty? # an unknown, expired or finished group: nothing to do (and nothing to abandon)
        JobbufE2E.record("empty", "group_id" => group_id, "jobs" => rows)
        return
      end
      # HSETNX answers true/false through redis-rb (Sidekiq 6), 1/0 through redis-client (7+).
      first_seen = rows.select do |r|
        [true, 1].include?(Sidekiq.redis { |c| c.hsetnx(SEEN, r["id"].to_s, group_id) })
      end
      unless first_seen.empty?
        JobbufE2E.record("abandoned", "group_id" => group_id, "jobs" => rows)
        return # "crash": neither jobbuf_complete nor jobbuf_fail; the lease will run out
      end
      earlier = Sidekiq.redis { |c| c.hmget(SEEN, *rows.map { |r| r["id"].to_s }) }.compact.uniq - [group_id]
      stale = earlier.map do |old|
        { "group_id" => old,
          "complete" => conn.exec_params("SELECT jobbuf_complete($1)", [old]).getvalue(0, 0).to_i,
          "group_rows" => conn.exec_params("SELECT count(*) FROM jobbuf_group($1)", [old]).getvalue(0, 0).to_i }
      end
      done = conn.exec_params("SELECT jobbuf_complete($1)", [group_id]).getvalue(0, 0).to_i
      JobbufE2E.record("completed", "group_id" => group_id, "jobs" => rows, "completed" => done, "stale" => stale)
    ensure
      conn.close
    end
  end
end
