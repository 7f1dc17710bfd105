# ActiveJob queue adapter `:jobbuf` (config.active_job.queue_adapter = :jobbuf): perform_later
# stages the job with jobbuf_stage in the caller's ActiveRecord transaction, as the Sidekiq job
# ActiveJob's own Sidekiq adapter would push; jobbuf's worker delivers it to Redis after the
# commit, where an unmodified Sidekiq server runs it. A rollback drops it.
require "active_job"
require "active_record"
require "jobbuf/active_job/sidekiq_payload"
require "jobbuf/active_job/stager"
require "jobbuf/active_job/deferred_enqueue_error"

module ActiveJob
  module QueueAdapters
    class JobbufAdapter
      # connection_class: the ActiveRecord class whose connection stages the jobs (the one whose
      # transactions the jobs must follow); ActiveRecord::Base unless told.
      # wrapper_class: the Sidekiq worker class named in the payload.
      def initialize(connection_class: ::ActiveRecord::Base,
                     wrapper_class: ::Jobbuf::ActiveJob::SidekiqPayload::WRAPPER_CLASS)
        @stager = ::Jobbuf::ActiveJob::Stager.new(connection_class)
        @wrapper_class = wrapper_class
      end

      def enqueue(job)
        refuse_deferred(job)
        stage_one(job, nil)
      end

      def enqueue_at(job, timestamp)
        refuse_deferred(job)
        stage_one(job, timestamp)
      end

      # ActiveJob.perform_all_later (Rails 7.1+): every job in one statement. Returns the number
      # staged: all of them, or an error and none.
      def enqueue_all(jobs)
        return 0 if jobs.empty?

        jobs.each { |job| refuse_deferred(job) }
        ids = @stager.stage_many(jobs.map { |job| [job.queue_name, payload(job), job.scheduled_at] })
        jobs.zip(ids) { |job, id| staged(job, id) }
        jobs.size
      end

      # Rails 7.2 asks the adapter whether to defer the enqueue of job classes left at
      # enqueue_after_transaction_commit :default until the transaction commits: no, the job is
      # staged inside it (deferring would lose it if the process died between commit and enqueue).
      def enqueue_after_transaction_commit?
        false
      end

      private

      # A job class set to enqueue after the commit (Rails 7.2 :always; Rails 8 true, 8.2's
      # default) reaches the adapter outside the caller's transaction: refused, every time, so
      # that it shows in the first test run instead of losing jobs to crashes in production.
      def refuse_deferred(job)
        setting = ::Jobbuf::ActiveJob::DeferredEnqueueError.setting_of(job.class)
        raise ::Jobbuf::ActiveJob::DeferredEnqueueError.new(job.class, setting) if setting
      end

      def stage_one(job, run_at_epoch)
        staged(job, @stager.stage(job.queue_name, payload(job), run_at_epoch))
      end

      def payload(job)
        ::Jobbuf::ActiveJob::SidekiqPayload.build(job, @wrapper_class)
      end

      # provider_job_id is the jobbuf id. The Sidekiq jid jobbuf gives the job ends with the same
      # number as 16 hex digits (jid[-16..].to_i(16) == provider_job_id); its first 8 are a salt
      # of the database that only the worker computes.
      def staged(job, id)
        job.provider_job_id = id
        job.successfully_enqueued = true if job.respond_to?(:successfully_enqueued=)
        id
      end
    end
  end
end
