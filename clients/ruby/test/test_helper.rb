# Shared setup of the gem's minitest tests: ActiveRecord connected to a PostgreSQL database that
# has the jobbuf extension (libpq's PGHOST, PGPORT, PGUSER, PGDATABASE: test/e2e/activejob_adapter.sh
# runs them against the harness's private cluster), a Widget model, and helpers that read what
# jobbuf_stage staged. The test queues are paused, so staged jobs stay in jobbuf.jobs to be read.
#
#   ruby -Ilib -Itest -e 'Dir["test/*_test.rb"].each { |f| require File.expand_path(f) }'
require "minitest/autorun"
require "logger"
require "json"
require "active_record"
require "global_id"
require "jobbuf/active_job"

GlobalID.app = "jobbuf-test"
ActiveRecord::Base.include GlobalID::Identification unless ActiveRecord::Base < GlobalID::Identification
ActiveRecord::Base.logger = nil
ActiveJob::Base.logger = Logger.new(nil)
ActiveRecord::Base.establish_connection(adapter: "postgresql", host: ENV["PGHOST"], port: ENV["PGPORT"],
                                        username: ENV["PGUSER"], database: ENV.fetch("PGDATABASE"))
ActiveJob::Base.queue_adapter = :jobbuf

module JobbufTest
  QUEUES = %w[unit unit_other].freeze

  def self.prepare_database
    connection = ActiveRecord::Base.connection
    connection.execute("CREATE TABLE IF NOT EXISTS widgets (id bigserial PRIMARY KEY, name text NOT NULL)")
    QUEUES.each do |queue|
      next if connection.select_value("SELECT count(*) FROM jobbuf.queues WHERE name = '#{queue}'").to_i == 1

      connection.execute("SELECT jobbuf_create_queue('#{queue}', 'sidekiq')")
      connection.execute("SELECT jobbuf_pause('#{queue}')")
    end
  end

  # The staged job with this id, or nil: {"queue", "payload" (parsed), "run_at" (epoch seconds),
  # "immediate" (run_at is the staging time: jobbuf's default when jobbuf_stage gets no run_at)}.
  def staged(id)
    row = ActiveRecord::Base.connection.exec_query(
      "SELECT queue, payload::text AS payload, extract(epoch FROM run_at)::float8 AS run_at, " \
      "run_at = staged_at AS immediate " \
      "FROM jobbuf.jobs WHERE id = $1", "test", [id]).first
    row && row.merge("payload" => JSON.parse(row["payload"]))
  end

  def staged_count
    ActiveRecord::Base.connection.select_value("SELECT count(*) FROM jobbuf.jobs").to_i
  end

  # The SQL statements (with their binds) that the block sends.
  def statements_of
    sent = []
    subscriber = ActiveSupport::Notifications.subscribe("sql.active_record") do |*, payload|
      binds = payload[:type_casted_binds]
      binds = binds.call if binds.respond_to?(:call)
      sent << { sql: payload[:sql], binds: binds } unless payload[:name] == "SCHEMA"
    end
    yield
    sent
  ensure
    ActiveSupport::Notifications.unsubscribe(subscriber)
  end
end

JobbufTest.prepare_database

class Widget < ActiveRecord::Base
end

class UnitJob < ActiveJob::Base
  queue_as :unit

  def perform(*); end
end

class OtherQueueJob < ActiveJob::Base
  queue_as :unit_other

  def perform(*); end
end

class MissingQueueJob < ActiveJob::Base
  queue_as :unit_missing

  def perform(*); end
end
