# The staged payload is the job ActiveJob's own Sidekiq adapter pushes through Sidekiq 6.4's
# client (captured with Sidekiq::Testing's fake mode, which keeps the JSON it would send), less
# the keys jobbuf's sidekiq target fills in itself: queue, jid, created_at, enqueued_at, and "at",
# which is the staged job's run_at.
require "test_helper"
require "sidekiq"
require "sidekiq/testing"
require "active_job/queue_adapters/sidekiq_adapter"

class SidekiqParityTest < Minitest::Test
  include JobbufTest

  FILLED_BY_JOBBUF = %w[queue jid created_at enqueued_at at].freeze

  def setup
    Sidekiq::Testing.fake!
    Sidekiq::Worker.clear_all
  end

  def teardown
    Sidekiq::Worker.clear_all
    Sidekiq::Testing.disable!
  end

  # What both adapters produce for the same job object; the ActiveJob enqueued_at (a clock read
  # at each serialization, in seconds) is set aside, provider_job_id is nil in both.
  def both_payloads(job, at = nil)
    sidekiq = ActiveJob::QueueAdapters::SidekiqAdapter.new
    at ? sidekiq.enqueue_at(job, at) : sidekiq.enqueue(job)
    pushed = ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper.jobs.last
    adapter = ActiveJob::QueueAdapters::JobbufAdapter.new
    job.provider_job_id = nil
    at ? adapter.enqueue_at(job, at) : adapter.enqueue(job)
    row = staged(job.provider_job_id)
    [pushed, row]
  end

  def comparable(payload)
    payload.merge("args" => payload["args"].map { |data| data.except("enqueued_at") })
  end

  def test_immediate_job_matches_sidekiqs_push
    widget = Widget.create!(name: "parity")
    pushed, row = both_payloads(UnitJob.new(widget, 1, "two", { "three" => { "four" => [5] } }, :sym))
    assert_equal "unit", pushed["queue"]
    assert_equal comparable(pushed.except(*FILLED_BY_JOBBUF)), comparable(row["payload"])
    assert_equal pushed["queue"], row["queue"]
  end

  def test_scheduled_job_matches_sidekiqs_push_with_at_as_run_at
    at = Time.now.to_f + 120
    pushed, row = both_payloads(UnitJob.new(1), at)
    assert_in_delta pushed["at"], row["run_at"], 0.000002
    assert_equal comparable(pushed.except(*FILLED_BY_JOBBUF)), comparable(row["payload"])
  end

  # A job class with sidekiq_options, as Sidekiq's Rails integration allows (it includes
  # Sidekiq::Worker::Options into ActiveJob::Base): both carry the class's retry and backtrace.
  def test_sidekiq_options_of_the_job_class_match_sidekiqs_push
    pushed, row = both_payloads(OptionedParityJob.new(1))
    assert_equal 5, row["payload"]["retry"]
    assert_equal 10, row["payload"]["backtrace"]
    assert_equal comparable(pushed.except(*FILLED_BY_JOBBUF)), comparable(row["payload"])
  end
end

class OptionedParityJob < ActiveJob::Base
  include Sidekiq::Worker::Options
  sidekiq_options retry: 5, backtrace: 10
  queue_as :unit

  def perform(*); end
end
