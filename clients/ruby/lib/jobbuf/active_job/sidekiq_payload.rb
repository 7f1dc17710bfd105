# The payload jobbuf stages for an ActiveJob job: the job hash ActiveJob's own Sidekiq adapter
# pushes (activejob's sidekiq_adapter.rb through Sidekiq::Client#push, Sidekiq 6.4), less the keys
# that jobbuf's `sidekiq` target writes itself when it delivers the job.
module Jobbuf
  module ActiveJob
    module SidekiqPayload
      # The worker class Sidekiq runs, as Rails' Sidekiq adapter names it: it calls
      # ActiveJob::Base.execute(args[0]) with the jid as provider_job_id. Another name (a newer
      # Sidekiq's own wrapper) can be given to the adapter as wrapper_class:.
      WRAPPER_CLASS = "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper".freeze

      # Sidekiq.default_worker_options as shipped: what Sidekiq::JobUtil#normalize_item merges
      # under every job whose worker class has no options of its own ("queue" is replaced).
      SIDEKIQ_DEFAULTS = { "retry" => true }.freeze

      # Written by jobbuf's sidekiq target (queue, jid, created_at, enqueued_at: README "Redis
      # formats"); "at" is the staged job's run_at instead.
      FILLED_BY_JOBBUF = %w[queue jid created_at enqueued_at at].freeze

      module_function

      def build(job, wrapper_class = WRAPPER_CLASS)
        payload = sidekiq_options(job.class).merge(
          "class" => wrapper_class,
          "wrapped" => job.class.name,
          "args" => [job.serialize]
        )
        FILLED_BY_JOBBUF.each { |key| payload.delete(key) }
        payload
      end

      # The options Sidekiq::Client#push would merge: Sidekiq's defaults (as the app configured
      # them, when Sidekiq is loaded in this process), then the job class's own sidekiq_options
      # (ActiveJob classes have them once Sidekiq's Rails integration is loaded), e.g.
      # `sidekiq_options retry: 5` or `retry: false`.
      def sidekiq_options(job_class)
        options = SIDEKIQ_DEFAULTS.dup
        options.merge!(stringify(sidekiq_default_options))
        options.merge!(stringify(job_class.get_sidekiq_options)) if job_class.respond_to?(:get_sidekiq_options)
        options
      end

      # Sidekiq 7+ calls them default_job_options, Sidekiq 6 default_worker_options.
      def sidekiq_default_options
        return {} unless defined?(::Sidekiq)
        return ::Sidekiq.default_job_options if ::Sidekiq.respond_to?(:default_job_options)
        return ::Sidekiq.default_worker_options if ::Sidekiq.respond_to?(:default_worker_options)

        {}
      end

      def stringify(hash)
        hash.each_with_object({}) { |(key, value), out| out[key.to_s] = value }
      end
    end
  end
end
