# Stages Sidekiq payloads with jobbuf_stage on an ActiveRecord connection: the statement runs in
# whatever transaction that connection has open (the caller's `transaction do ... end`), or in its
# own when none is. Payloads and times travel as bind parameters, never inside the SQL text; their
# JSON is Jobbuf::JsonText's (a NUL character is refused before any statement, large Floats stay
# Floats).
require "json"
require "active_record"
require "jobbuf/json_text"
require "jobbuf/active_job/unknown_queue_error"

module Jobbuf
  module ActiveJob
    class Stager
      # One job; run_at NULL means now. Epoch seconds travel as text: exact and timezone-free.
      STAGE_ONE = "SELECT jobbuf_stage($1::text, $2::jsonb, pg_catalog.to_timestamp($3::float8))".freeze

      # Many jobs in one statement (one round trip), ids in the order given: $1 is a JSON array of
      # [queue, payload, epoch seconds or null].
      STAGE_MANY = "SELECT jobbuf_stage(job->>0, job->1, pg_catalog.to_timestamp((job->>2)::float8)) " \
                   "FROM pg_catalog.jsonb_array_elements($1::jsonb) WITH ORDINALITY AS staged(job, n) " \
                   "ORDER BY n".freeze

      # One plain Sidekiq job: the jobbuf queue is the one that delivers into the Sidekiq queue $1
      # (jobbuf_queue_for, whose error names the jobbuf_create_queue call to make).
      STAGE_SIDEKIQ = "SELECT jobbuf_stage(jobbuf_queue_for('sidekiq', $1::text), $2::jsonb, " \
                      "pg_catalog.to_timestamp($3::float8))".freeze

      def initialize(connection_class)
        @connection_class = connection_class
      end

      # Returns the jobbuf id of the staged job.
      def stage(queue, payload, run_at_epoch)
        rows = execute(STAGE_ONE, [queue.to_s, JsonText.generate(payload), epoch_text(run_at_epoch)])
        Integer(rows.first.first)
      end

      # A plain Sidekiq job for the Sidekiq queue sidekiq_queue. Returns its jobbuf id.
      def stage_sidekiq(sidekiq_queue, payload, run_at_epoch)
        rows = execute(STAGE_SIDEKIQ, [sidekiq_queue.to_s, JsonText.generate(payload), epoch_text(run_at_epoch)])
        Integer(rows.first.first)
      end

      def connection
        @connection_class.connection
      end

      # jobs: [[queue, payload, run_at epoch or nil], ...]. Returns their jobbuf ids, in order.
      def stage_many(jobs)
        batch = jobs.map { |queue, payload, run_at_epoch| [queue.to_s, payload, epoch_text(run_at_epoch)] }
        execute(STAGE_MANY, [JsonText.generate(batch)]).map { |row| Integer(row.first) }
      end

      private

      def execute(sql, binds)
        connection.exec_query(sql, "jobbuf_stage", binds, prepare: true).rows
      rescue ::ActiveRecord::StatementInvalid => e
        queue = UnknownQueueError.queue_named_by(e)
        raise UnknownQueueError, queue if queue

        raise
      end

      def epoch_text(epoch)
        epoch.nil? ? nil : format("%.6f", epoch.to_f)
      end
    end
  end
end
