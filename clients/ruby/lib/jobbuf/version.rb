# The version of the jobbuf gem (the Ruby client of the jobbuf PostgreSQL extension).
module Jobbuf
  VERSION = "1.2.0"
end
