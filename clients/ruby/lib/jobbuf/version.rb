# The version of the jobbuf gem (the Ruby client of the jobbuf PostgreSQL extension).
module Jobbuf
  VERSION = "1.1.0"
end
