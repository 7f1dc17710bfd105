# The :jobbuf adapter against a real PostgreSQL with the jobbuf extension: what perform_later and
# set(wait:) stage, in which transaction, the unknown-queue error, and enqueue_all.
require "test_helper"

class AdapterTest < Minitest::Test
  include JobbufTest

  WRAPPER = "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper".freeze

  def test_the_adapter_name_resolves_to_the_jobbuf_adapter
    assert_instance_of ActiveJob::QueueAdapters::JobbufAdapter, ActiveJob::Base.queue_adapter
    assert_equal ActiveJob::QueueAdapters::JobbufAdapter, ActiveJob::QueueAdapters.lookup(:jobbuf)
    refute ActiveJob::Base.queue_adapter.enqueue_after_transaction_commit?
  end

  def test_perform_later_stages_the_sidekiq_job_of_activejobs_sidekiq_adapter
    widget = Widget.create!(name: "w")
    job = UnitJob.perform_later(widget, 7, "seven", { "k" => [1, 2.5, nil, true] })
    row = staged(job.provider_job_id)
    refute_nil row, "a perform_later outside a transaction commits by itself"
    assert_equal "unit", row["queue"]
    assert row["immediate"]
    payload = row["payload"]
    assert_equal %w[args class retry wrapped], payload.keys.sort
    assert_equal WRAPPER, payload["class"]
    assert_equal "UnitJob", payload["wrapped"]
    assert_equal true, payload["retry"]
    assert_equal 1, payload["args"].size
    data = payload["args"].first
    assert_equal job.job_id, data["job_id"]
    assert_equal "UnitJob", data["job_class"]
    assert_equal "unit", data["queue_name"]
    assert_equal({ "_aj_globalid" => widget.to_global_id.to_s }, data["arguments"][0])
    assert_equal [7, "seven"], data["arguments"][1, 2]
    assert_equal [1, 2.5, nil, true], data["arguments"][3]["k"]
    assert_equal job.serialize.except("enqueued_at", "provider_job_id"), data.except("enqueued_at", "provider_job_id")
  end

  def test_set_wait_stages_with_run_at_and_no_at_key
    job = UnitJob.set(wait: 3600).perform_later(1)
    row = staged(job.provider_job_id)
    assert_in_delta job.scheduled_at.to_f, row["run_at"], 0.000002
    refute row["immediate"]
    refute row["payload"].key?("at")
    job = UnitJob.set(wait_until: Time.at(2_000_000_000.25)).perform_later(2)
    assert_in_delta 2_000_000_000.25, staged(job.provider_job_id)["run_at"], 0.000002
  end

  def test_inside_a_transaction_the_job_commits_or_rolls_back_with_it
    committed = nil
    ActiveRecord::Base.transaction do
      Widget.create!(name: "kept")
      committed = UnitJob.perform_later(1)
    end
    refute_nil staged(committed.provider_job_id)

    rolled_back = nil
    ActiveRecord::Base.transaction do
      Widget.create!(name: "dropped")
      rolled_back = UnitJob.perform_later(2)
      assert_equal "unit", staged(rolled_back.provider_job_id)["queue"], "staged in the open transaction"
      raise ActiveRecord::Rollback
    end
    assert_nil staged(rolled_back.provider_job_id)
    assert_nil Widget.find_by(name: "dropped")
  end

  def test_a_rolled_back_savepoint_drops_its_job_and_the_outer_transaction_keeps_its_own
    outer = inner = nil
    ActiveRecord::Base.transaction do
      outer = UnitJob.perform_later("outer")
      ActiveRecord::Base.transaction(requires_new: true) do
        inner = UnitJob.perform_later("inner")
        raise ActiveRecord::Rollback
      end
    end
    refute_nil staged(outer.provider_job_id)
    assert_nil staged(inner.provider_job_id)
  end

  def test_payloads_travel_as_bind_parameters
    hostile = "'); DELETE FROM jobbuf.jobs; -- $1 \\ \" \u00e9 \u{1F600}"
    job = nil
    sent = statements_of { job = UnitJob.perform_later(hostile, { hostile => hostile }) }
    assert_equal 1, sent.size
    refute_includes sent.first[:sql], "DELETE"
    assert(sent.first[:binds].any? { |bind| bind.to_s.include?(hostile.to_json[1..-2]) })
    arguments = staged(job.provider_job_id)["payload"]["args"].first["arguments"]
    assert_equal hostile, arguments[0]
    assert_equal hostile, arguments[1][hostile]
  end

  def test_an_unknown_queue_names_the_jobbuf_create_queue_call
    error = assert_raises(Jobbuf::ActiveJob::UnknownQueueError) { MissingQueueJob.perform_later(1) }
    assert_kind_of ActiveRecord::StatementInvalid, error
    assert_equal "unit_missing", error.queue
    assert_includes error.message, "SELECT jobbuf_create_queue('unit_missing', 'sidekiq');"
    assert_equal 1, ActiveRecord::Base.connection.select_value("SELECT 1").to_i, "the connection is usable after"
    assert_equal "SELECT jobbuf_create_queue('it''s', 'sidekiq');",
                 Jobbuf::ActiveJob::UnknownQueueError.create_queue_call("it's")
  end

  def test_an_unknown_queue_inside_a_transaction_rolls_it_back
    before = staged_count
    assert_raises(Jobbuf::ActiveJob::UnknownQueueError) do
      ActiveRecord::Base.transaction do
        Widget.create!(name: "with a job for a missing queue")
        UnitJob.perform_later(1)
        MissingQueueJob.perform_later(1)
      end
    end
    assert_nil Widget.find_by(name: "with a job for a missing queue")
    assert_equal before, staged_count
  end

  # A connection whose search_path does not reach the extension: PostgreSQL's own error, untouched.
  def test_other_errors_pass_through_unchanged
    elsewhere = record_class("NoJobbufRecord", schema_search_path: "pg_catalog")
    error = assert_raises(ActiveRecord::StatementInvalid) do
      ActiveJob::QueueAdapters::JobbufAdapter.new(connection_class: elsewhere).enqueue(UnitJob.new(1))
    end
    refute_kind_of Jobbuf::ActiveJob::UnknownQueueError, error
    assert_match(/function jobbuf_stage\(.*\) does not exist/, error.message)
  ensure
    elsewhere&.remove_connection
  end

  def test_sidekiq_options_of_the_job_class_are_carried_like_sidekiqs_client_does
    job_class = Class.new(UnitJob) do
      def self.name = "OptionedJob"
      def self.get_sidekiq_options = { "retry" => 3, "backtrace" => 10, "queue" => "ignored", "tags" => ["t"] }
    end
    payload = staged(job_class.perform_later(1).provider_job_id)["payload"]
    assert_equal 3, payload["retry"]
    assert_equal 10, payload["backtrace"]
    assert_equal ["t"], payload["tags"]
    refute payload.key?("queue")
    assert_equal "OptionedJob", payload["wrapped"]
  end

  def test_the_connection_class_decides_which_transaction_the_job_follows
    other = record_class("OtherConnectionRecord")
    adapter = ActiveJob::QueueAdapters::JobbufAdapter.new(connection_class: other)
    job = UnitJob.new("own connection")
    ActiveRecord::Base.transaction do
      adapter.enqueue(job)
      raise ActiveRecord::Rollback
    end
    refute_nil staged(job.provider_job_id), "staged on the other connection, outside Base's transaction"
  ensure
    other&.remove_connection
  end

  def test_enqueue_all_stages_every_job_in_one_statement
    adapter = ActiveJob::QueueAdapters::JobbufAdapter.new
    jobs = [UnitJob.new(1), OtherQueueJob.new(2), UnitJob.new(3)]
    jobs[1].scheduled_at = Time.now + 600  # a Time since ActiveJob 7.1, a Float before
    count = nil
    sent = statements_of { count = adapter.enqueue_all(jobs) }
    assert_equal 3, count
    assert_equal 1, sent.size, "one statement for all the jobs"
    ids = jobs.map(&:provider_job_id)
    assert ids.all?(Integer)
    assert_equal ids.sort, ids, "ids in the order of the jobs"
    rows = ids.map { |id| staged(id) }
    assert_equal %w[unit unit_other unit], rows.map { |r| r["queue"] }
    assert_equal [[1], [2], [3]], rows.map { |r| r["payload"]["args"].first["arguments"] }
    assert rows[0]["immediate"]
    refute rows[1]["immediate"]
    assert_in_delta jobs[1].scheduled_at.to_f, rows[1]["run_at"], 0.000002
    assert(rows.all? { |r| r["payload"]["class"] == WRAPPER && r["payload"]["retry"] == true })
    assert_equal 0, adapter.enqueue_all([])
  end

  def test_enqueue_all_with_an_unknown_queue_stages_none
    before = staged_count
    error = assert_raises(Jobbuf::ActiveJob::UnknownQueueError) do
      ActiveJob::QueueAdapters::JobbufAdapter.new.enqueue_all([UnitJob.new(1), MissingQueueJob.new(2)])
    end
    assert_equal "unit_missing", error.queue
    assert_equal before, staged_count
  end

  private

  # An abstract ActiveRecord class with its own connection to the test database.
  def record_class(name, **config)
    klass = Class.new(ActiveRecord::Base) { self.abstract_class = true }
    klass.define_singleton_method(:name) { name }
    klass.establish_connection(ActiveRecord::Base.connection_db_config.configuration_hash.merge(config))
    klass
  end
end
