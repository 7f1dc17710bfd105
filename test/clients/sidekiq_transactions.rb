# End-to-end test of Jobbuf::Sidekiq.transactional_push! with plain Sidekiq jobs (run by
# test/e2e/clients_sidekiq.sh, with the Sidekiq, ActiveRecord and Ruby on PATH):
#   ruby sidekiq_transactions.rb stage EXPECTED.json
#     perform_async / perform_in / set(queue:, retry:) / push_bulk of HardJob (the class
#     test/consumers/sidekiq/app.rb runs) inside ActiveRecord::Base.transaction, every 10th
#     transaction rolled back; a NUL character refused before the transaction is touched; an
#     unknown Sidekiq queue named with its jobbuf_create_queue call; a push outside any transaction
#     going to Redis as Sidekiq's own
#   ruby sidekiq_transactions.rb verify EXPECTED.json RAN.jsonl
#     what the Sidekiq server ran: committed jobs once, rolled-back ones never, scheduled ones not
#     before their time, in the Sidekiq queue asked for, Floats (1e16) as Floats
# Libpq's PGHOST/PGPORT/PGUSER/PGDATABASE and REDIS_URL locate the servers.
$LOAD_PATH.unshift File.expand_path("../../clients/ruby/lib", __dir__)
require "json"
require "logger"
require "active_record"
require "jobbuf/sidekiq"

Redis.silence_deprecations = true if defined?(Redis) && Redis.respond_to?(:silence_deprecations=)
$failures = 0
def check(ok, what, detail = nil)
  puts(ok ? "ok - #{what}" : "not ok - #{what}#{detail ? ": #{detail}" : ""}")
  $failures += 1 unless ok
end

class HardJob
  include Sidekiq::Job
end

def stage(out_file)
  ActiveRecord::Base.logger = nil
  ActiveRecord::Base.establish_connection(adapter: "postgresql", host: ENV["PGHOST"], port: ENV["PGPORT"],
                                          username: ENV["PGUSER"], database: ENV.fetch("PGDATABASE"))
  Jobbuf::Sidekiq.transactional_push!
  puts "# Sidekiq #{Sidekiq::VERSION}, ActiveRecord #{ActiveRecord::VERSION::STRING}, Ruby #{RUBY_VERSION}"
  expected = []
  returned = []
  60.times do |n|
    rolled_back = n % 10 == 5
    planned = []
    ActiveRecord::Base.transaction do
      token = "t#{n}"
      case n % 4
      when 0
        returned << HardJob.perform_async(token, n, 1e16, { "text" => "é ✓ \"q\"" })
        planned << { "token" => token, "queue" => "default", "float" => true }
      when 1
        planned << { "token" => token, "queue" => "default", "not_before" => Time.now.to_f + 2 }
        returned << HardJob.perform_in(2, token, n)
      when 2
        returned << HardJob.set(queue: "critical", retry: 3).perform_async(token, n)
        planned << { "token" => token, "queue" => "critical", "retry" => 3 }
      else
        returned << Sidekiq::Client.push_bulk("class" => HardJob, "args" => [["#{token}a", n], ["#{token}b", n]])
        planned << { "token" => "#{token}a", "queue" => "default" } << { "token" => "#{token}b", "queue" => "default" }
      end
      # A NUL character: refused before any statement, so the transaction goes on.
      begin
        HardJob.perform_async("nul-#{n}", "a\0b")
        check(false, "a NUL character in an argument is refused")
      rescue Jobbuf::NulCharacterError => e
        check(e.message.include?("NUL"), "a NUL character in an argument is refused before the transaction is touched") if n.zero?
      end
      raise ActiveRecord::Rollback if rolled_back
    end
    planned.each { |p| expected << p.merge("committed" => !rolled_back) }
  end
  # (push_bulk returns [] on Sidekiq 6 when its middleware stops every job, [nil, nil] on 7 and 8)
  check(returned.all? { |r| r.nil? || (r.is_a?(Array) && r.all?(&:nil?)) },
        "inside a transaction perform_async returns nil (the jid comes from jobbuf)", returned.compact.first(3).inspect)
  check(Jobbuf::Sidekiq.last_staged_id.is_a?(Integer), "Jobbuf::Sidekiq.last_staged_id is the jobbuf id")

  # Outside a transaction: Sidekiq's own push (a jid, nothing staged).
  before = Jobbuf::Sidekiq.last_staged_id
  jid = HardJob.perform_async("outside", 0)
  check(jid.is_a?(String) && Jobbuf::Sidekiq.last_staged_id == before, "outside a transaction perform_async is Sidekiq's own push", jid.inspect)
  expected << { "token" => "outside", "queue" => "default", "committed" => true }

  # A Sidekiq queue no jobbuf queue delivers into.
  begin
    ActiveRecord::Base.transaction { HardJob.set(queue: "nope").perform_async("nope", 0) }
    check(false, "an unknown Sidekiq queue is refused")
  rescue ActiveRecord::StatementInvalid => e
    check(e.message.include?("jobbuf_create_queue('nope', 'sidekiq')"), "an unknown Sidekiq queue names the jobbuf_create_queue call", e.message)
  end
  File.write(out_file, JSON.generate(expected))
  puts "# planned #{expected.size} jobs, #{expected.count { |e| e["committed"] }} committed"
  puts "runs #{expected.count { |e| e["committed"] }}"
end

def verify(expected_file, ran_file)
  want = JSON.parse(File.read(expected_file))
  ran = File.readlines(ran_file).map { |l| JSON.parse(l) }
  by_token = ran.group_by { |r| r["args"][0] }
  problems = Hash.new { |h, k| h[k] = [] }
  want.each do |e|
    runs = by_token.delete(e["token"]) || []
    if !e["committed"]
      problems[:rolled_back] << e["token"] unless runs.empty?
      next
    end
    next problems[:count] << "#{e["token"]}: #{runs.size} runs" unless runs.size == 1

    r = runs[0]
    problems[:queue] << "#{e["token"]} in #{r["queue"]}" unless r["queue"] == e["queue"]
    problems[:retry] << "#{e["token"]}: retry #{r["retry"].inspect}" unless r["retry"] == (e["retry"] || true)
    problems[:early] << "#{e["token"]} #{(e["not_before"] - r["ran_at"]).round(3)} s early" if e["not_before"] && r["ran_at"] < e["not_before"]
    if e["float"]
      problems[:float] << "#{e["token"]}: #{r["args"][2].inspect} (#{r["args"][2].class})" unless r["args"][2].is_a?(Float) && r["args"][2] == 1e16
      problems[:text] << e["token"] unless r["args"][3] == { "text" => "é ✓ \"q\"" }
    end
  end
  committed = want.count { |e| e["committed"] }
  check(committed > 50 && committed < want.size, "committed (#{committed}) and rolled-back (#{want.size - committed}) jobs planned")
  check(want.count { |e| e["not_before"] && e["committed"] } > 5, "some committed jobs were scheduled (perform_in)")
  %i[count rolled_back queue retry early float text].each do |k|
    what = { count: "every committed job ran exactly once", rolled_back: "no rolled-back job ran",
             queue: "each ran in the Sidekiq queue it was pushed to (set(queue:), jobbuf_queue_for)",
             retry: "retry as set(retry:) gave it, else Sidekiq's default true",
             early: "no perform_in job ran before its time", float: "1e16 arrived as a Float",
             text: "unicode and quotes intact" }[k]
    check(problems[k].empty?, what, problems[k].first(5).join("; "))
  end
  check(by_token.empty?, "Sidekiq ran nothing else", by_token.keys.first(5).inspect)
end

mode, *args = ARGV
case mode
when "stage" then stage(*args)
when "verify" then verify(*args)
else abort "usage: sidekiq_transactions.rb stage|verify ..."
end
exit($failures.zero? ? 0 : 1)
