# The error perform_later raises when the job's queue does not exist in jobbuf.queues: it names
# the jobbuf_create_queue call to make. It is an ActiveRecord::StatementInvalid because that is
# what happened: PostgreSQL refused the statement, which aborts the enclosing transaction.
require "active_record"

module Jobbuf
  module ActiveJob
    class UnknownQueueError < ::ActiveRecord::StatementInvalid
      # jobbuf_stage's message for a missing queue (src/staging/job_validation.cpp).
      UNKNOWN_QUEUE = /jobbuf: unknown queue "(.*)"/.freeze

      attr_reader :queue

      # The queue a jobbuf_stage failure names when it is jobbuf's unknown-queue error, else nil.
      def self.queue_named_by(error)
        first_line = error.message.to_s.lines.find { |line| line.match?(UNKNOWN_QUEUE) }
        first_line && first_line[UNKNOWN_QUEUE, 1]
      end

      def self.create_queue_call(queue)
        "SELECT jobbuf_create_queue('#{queue.gsub("'", "''")}', 'sidekiq');"
      end

      def initialize(queue)
        @queue = queue
        super("jobbuf: queue \"#{queue}\" does not exist: create it (in a migration) with " \
              "#{self.class.create_queue_call(queue)} " \
              "PostgreSQL aborted the enclosing transaction, if any: nothing in it commits.")
      end
    end
  end
end
