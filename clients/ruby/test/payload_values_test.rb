# Values jsonb cannot take as Ruby's JSON writes them, through the :jobbuf adapter (the same
# Jobbuf::JsonText serves Jobbuf::Sidekiq): a NUL character is refused before any statement, so
# the caller's transaction goes on; Floats Ruby writes with an exponent (1e15 and up) are staged
# with a decimal point, so Sidekiq's JSON reads them back as the same Floats.
require "test_helper"

class PayloadValuesTest < Minitest::Test
  include JobbufTest

  def test_a_nul_character_is_refused_and_the_transaction_goes_on
    kept = nil
    sent = nil
    ActiveRecord::Base.transaction do
      sent = statements_of do
        error = assert_raises(Jobbuf::NulCharacterError) { UnitJob.perform_later("a\0b") }
        assert_match(/NUL character/, error.message)
        assert_raises(Jobbuf::NulCharacterError) { UnitJob.perform_later({ "key\0" => 1 }) }
        assert_raises(Jobbuf::NulCharacterError) { ActiveJob.perform_all_later([UnitJob.new(1), UnitJob.new("\0")]) } if ActiveJob.respond_to?(:perform_all_later)
      end
      kept = UnitJob.perform_later("after").provider_job_id
    end
    assert_empty sent, "no statement reached the transaction"
    refute_nil staged(kept), "the transaction committed the job staged after the refusal"
  end

  def test_floats_stay_floats
    values = [1e16, 1e15, -2.5e20, 1.0000000000000002e15, 1.5, 1e-20, 1.7976931348623157e308]
    job = UnitJob.perform_later(values, { "f" => 1e16 })
    text = ActiveRecord::Base.connection.select_value("SELECT payload::text FROM jobbuf.jobs WHERE id = #{Integer(job.provider_job_id)}")
    arguments = JSON.parse(text)["args"][0]["arguments"]
    assert_equal values, arguments[0]
    assert(arguments[0].all? { |v| v.is_a?(Float) }, "read back as Floats: #{arguments[0].inspect} from #{text}")
    assert_kind_of Float, arguments[1]["f"]
  end

  # Rails 7.2+ defines enqueue_after_transaction_commit on job classes; on older Rails the test
  # defines the class method the adapter reads, with the values Rails 7.2 (:always) and 8 (true) use.
  class DeferredJob < ActiveJob::Base
    queue_as :unit
    def perform(*); end
  end

  def with_deferral(value)
    if DeferredJob.respond_to?(:enqueue_after_transaction_commit=)
      previous = DeferredJob.enqueue_after_transaction_commit
      DeferredJob.enqueue_after_transaction_commit = value
      yield
      DeferredJob.enqueue_after_transaction_commit = previous
    else
      DeferredJob.define_singleton_method(:enqueue_after_transaction_commit) { value }
      yield
      DeferredJob.singleton_class.send(:remove_method, :enqueue_after_transaction_commit)
    end
  end

  def test_a_job_class_that_enqueues_after_the_commit_is_refused
    deferring = defined?(ActiveJob::EnqueueAfterTransactionCommit) && ActiveJob.version < Gem::Version.new("8.0") ? :always : true
    before = staged_count
    with_deferral(deferring) do
      error = assert_raises(Jobbuf::ActiveJob::DeferredEnqueueError) do
        ActiveRecord::Base.transaction { DeferredJob.perform_later(1) }
      end
      assert_match(/self\.enqueue_after_transaction_commit = false/, error.message)
    end
    assert_equal before, staged_count
    not_deferring = deferring == true ? false : :never
    with_deferral(not_deferring) do
      id = nil
      ActiveRecord::Base.transaction do
        id = DeferredJob.perform_later(2).provider_job_id
        refute_nil staged(id), "staged inside the open transaction"
      end
      refute_nil staged(id)
    end
  end
end
