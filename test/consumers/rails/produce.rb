# The producer of test/e2e/activejob_sidekiq.sh: 100 transactions, each creating a Widget and
# calling RecordJob.perform_later(widget, n, string, hash); those with n % 10 == 7 roll back
# (half with ActiveRecord::Rollback, half with an exception), n = 5, 50, 95 are scheduled with
# set(wait: 4.seconds). Then one committed FlakyJob. Writes what it did as JSON to ARGV[0].
#
#   ruby produce.rb EXPECTATIONS.json
require "json"
require_relative "app"

ROLLED_BACK_ON_PURPOSE = "jobbuf e2e: rolling back on purpose".freeze
SCHEDULED = [5, 50, 95].freeze

produced = (1..100).map do |n|
  rolled_back = n % 10 == 7
  job = widget_id = nil
  begin
    ActiveRecord::Base.transaction do
      widget = Widget.create!(n: n, name: "widget-#{n}")
      widget_id = widget.id
      enqueuer = SCHEDULED.include?(n) ? RecordJob.set(wait: 4) : RecordJob
      job = enqueuer.perform_later(widget, n, "str-#{n}", JobbufRailsE2E.hash_for(n))
      raise ActiveRecord::Rollback if rolled_back && n.even?
      raise ROLLED_BACK_ON_PURPOSE if rolled_back
    end
  rescue RuntimeError => e
    raise unless e.message == ROLLED_BACK_ON_PURPOSE
  end
  # scheduled_at: epoch seconds (ActiveJob 7.1+ keeps a Time, earlier versions a Float).
  { "n" => n, "committed" => !rolled_back, "scheduled_at" => job.scheduled_at&.to_f,
    "provider_job_id" => job.provider_job_id, "widget_id" => widget_id }
end

flaky = ActiveRecord::Base.transaction do
  widget = Widget.create!(n: 0, name: "flaky")
  { "widget_id" => widget.id, "provider_job_id" => FlakyJob.perform_later(widget).provider_job_id }
end

File.write(ARGV.fetch(0), JSON.generate("record" => produced, "flaky" => flaky))
puts "produced: #{produced.count { |p| p["committed"] }} committed, #{produced.count { |p| !p["committed"] }} rolled back, " \
     "#{produced.count { |p| p["scheduled_at"] }} scheduled, 1 flaky"
