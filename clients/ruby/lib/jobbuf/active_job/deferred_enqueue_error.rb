# The error the :jobbuf adapter raises for a job class that ActiveJob enqueues after the
# transaction commits (enqueue_after_transaction_commit: Rails 7.2's :always, Rails 8's true,
# which Rails 8.2 makes the default): the adapter would then stage the job outside the caller's
# transaction, and a process dying between the commit and the enqueue would lose it.
module Jobbuf
  module ActiveJob
    class DeferredEnqueueError < StandardError
      DEFERRING = [true, :always].freeze

      # The job class's setting when it defers the enqueue, else nil (also on Rails < 7.2, which
      # has no such setting).
      def self.setting_of(job_class)
        return nil unless job_class.respond_to?(:enqueue_after_transaction_commit)

        setting = job_class.enqueue_after_transaction_commit
        DEFERRING.include?(setting) ? setting : nil
      end

      def initialize(job_class, setting)
        super("jobbuf: #{job_class.name} enqueues after the transaction commits " \
              "(enqueue_after_transaction_commit = #{setting.inspect}): the :jobbuf adapter stages jobs " \
              "inside your transaction, which is what makes them safe. Set " \
              "`self.enqueue_after_transaction_commit = false` in #{job_class.name} or ApplicationJob " \
              "(Rails 8; on Rails 7.2 `:never`, or leave it at `:default`).")
      end
    end
  end
end
