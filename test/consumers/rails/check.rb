# The judge of test/e2e/activejob_sidekiq.sh: compares what produce.rb did (ARGV[0]) with what
# the jobs Sidekiq performed wrote into job_runs, and prints one count per line, "name=value".
#
#   ruby check.rb EXPECTATIONS.json
require "json"
require_relative "app"

WRAPPER = "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper".freeze

produced = JSON.parse(File.read(ARGV.fetch(0)))
expected = produced["record"]
committed = expected.select { |e| e["committed"] }.to_h { |e| [e["n"], e] }
rolled_back = expected.reject { |e| e["committed"] }.map { |e| e["n"] }
runs = JobRun.where(kind: "record").order(:id).map(&:attributes)
runs_by_n = runs.group_by { |r| r["n"] }

# The jid ends with the jobbuf id in 16 hex digits (provider_job_id at enqueue time).
jid_of_job = lambda do |run, jobbuf_id|
  jid = run["sidekiq"]["jid"].to_s
  jid.match?(/\A[0-9a-f]{24}\z/) && run["provider_job_id"] == jid && jid[-16..].to_i(16) == jobbuf_id
end
scheduled = committed.values.select { |e| e["scheduled_at"] }
scheduled_runs = scheduled.filter_map { |e| [e, runs_by_n[e["n"]]&.first] if runs_by_n[e["n"]] }
flaky = JobRun.where(kind: "flaky").order(:id).map(&:attributes)
flaky_failed = flaky.select { |r| r["str"] == "failed" }
flaky_succeeded = flaky.select { |r| r["str"] == "succeeded" }

counts = {
  "record_runs" => runs.size,
  "distinct_n" => runs_by_n.size,
  "committed_ran_once" => committed.keys.count { |n| runs_by_n[n]&.size == 1 },
  "rolled_back_ran" => rolled_back.count { |n| runs_by_n.key?(n) },
  "unexpected_runs" => runs.count { |r| !committed.key?(r["n"]) },
  "globalid_record_found" => runs.count do |r|
    e = committed[r["n"]]
    e && r["widget_id"] == e["widget_id"] && r["widget_n"] == r["n"]
  end,
  "arguments_intact" => runs.count do |r|
    r["str"] == "str-#{r["n"]}" && r["hash_arg"] == JobbufRailsE2E.hash_for(r["n"])
  end,
  "sidekiq_activejob_shape" => runs.count do |r|
    s = r["sidekiq"]
    s["class"] == WRAPPER && s["wrapped"] == "RecordJob" && s["queue"] == "default" && s["retry"] == true
  end,
  "jid_from_jobbuf_id" => runs.count { |r| committed[r["n"]] && jid_of_job.(r, committed[r["n"]]["provider_job_id"]) },
  "scheduled_ran" => scheduled_runs.size,
  "scheduled_early" => scheduled_runs.count { |e, r| r["ran_at"] < e["scheduled_at"] },
  "flaky_failed" => flaky_failed.size,
  "flaky_succeeded" => flaky_succeeded.size,
  "flaky_retried_by_sidekiq" => flaky_succeeded.count do |r|
    first = flaky_failed.first
    first && r["sidekiq"]["retry_count"] == 0 && first["sidekiq"]["retry_count"].nil? &&
      r["sidekiq"]["jid"] == first["sidekiq"]["jid"] && jid_of_job.(r, produced["flaky"]["provider_job_id"])
  end,
}
scheduled_runs.each do |e, r|
  puts "# scheduled n=#{e["n"]}: run_at #{format("%.3f", e["scheduled_at"])}, ran at #{format("%.3f", r["ran_at"])}"
end
counts.each { |name, value| puts "#{name}=#{value}" }
