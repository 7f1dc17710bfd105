# A Sidekiq client middleware that makes plain Sidekiq::Job pushes (perform_async, perform_in,
# set(...), push_bulk) transactional: inside an open transaction of the ActiveRecord connection,
# the job hash Sidekiq's client built (after the middleware before this one) is staged with
# jobbuf_stage in that transaction instead of being pushed to Redis, and jobbuf's worker delivers
# it after the commit; a rollback drops it. Outside a transaction the push goes to Redis as
# Sidekiq does (there is no transaction to follow). The jobbuf queue is the one delivering into
# the job's Sidekiq queue (SQL jobbuf_queue_for). Add it last in the client chain.
require "active_record"
require "jobbuf/active_job/stager"
require "jobbuf/active_job/sidekiq_payload"

module Jobbuf
  module Sidekiq
    class Middleware
      # Sidekiq 7+ passes its configuration to middleware that accept it.
      attr_accessor :config

      def initialize(connection_class = ::ActiveRecord::Base)
        @connection_class = connection_class
        @stager = ::Jobbuf::ActiveJob::Stager.new(connection_class)
      end

      # Sidekiq's client middleware interface (6.x, 7.x, 8.x). Returning false without yielding
      # stops Sidekiq's push: perform_async then returns nil (the jid is given when jobbuf delivers
      # the job; the jobbuf id is in Jobbuf::Sidekiq.last_staged_id).
      def call(_job_class, job, queue, _redis_pool)
        return yield unless transaction_open?

        payload = job.reject { |key, _| ::Jobbuf::ActiveJob::SidekiqPayload::FILLED_BY_JOBBUF.include?(key) }
        Thread.current[:jobbuf_last_staged_id] = @stager.stage_sidekiq(queue, payload, job["at"])
        false
      end

      private

      # A thread that holds no connection has no transaction open (and Sidekiq's own threads, its
      # scheduler among them, are not given one by asking).
      def transaction_open?
        @connection_class.connection_pool.active_connection? && @stager.connection.transaction_open?
      end
    end
  end
end
