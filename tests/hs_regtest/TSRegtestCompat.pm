package TSRegtestCompat;

# Loaded into every HandlerSocket regression test (plugin/handler_socket/regtest/test_01_lib/*.pl)
# by scripts/hs_regtest.sh through PERL5OPT=-MTSRegtestCompat.  It fixes, from outside, the ways in
# which Debian 12's Perl stack differs from the one the .expected files were recorded with, and lets
# the suite run against any ports.  The test files themselves are never modified.
#
#  1. DBD::MariaDB sends a byte string (no UTF-8 flag) containing bytes 0x80-0xff as Latin-1
#     characters, i.e. UTF-8-encoded, unless the parameter is bound as binary (old DBD::mysql sent
#     the bytes as they were).  Tests 03 and 04 store single bytes 0x00-0xff that way.
#     -> DBI::st::execute binds such parameters as SQL_VARBINARY.
#  2. Under `use bigint`, Math::BigInt >= 1.999816 rounds division toward minus infinity (F-division);
#     the expected files were recorded when it truncated toward zero (tests 15, 19: -128/3 = -42).
#     -> the `/` and `/=` operators of Math::BigInt truncate (btdiv).
#  3. Net::HandlerSocket returns NULL columns as the read-only &PL_sv_undef, and test 19 assigns
#     to them through a foreach alias ("Modification of a read-only value attempted").
#     -> the result arrays of Net::HandlerSocket's execute_* methods are copied into fresh scalars.
#  4. The write-port tests hard-code port 9999 (get_hs_connection(undef, 9999)).
#     -> if HSPORT_WR is set, a request for port 9999 goes to $ENV{HSPORT_WR} instead.
#     (The read port and the MySQL host/port already come from HSPORT, MYHOST, MYPORT.)
#     If HSHOST is set, HS connections go there instead of MYHOST (for MYHOST=localhost + a socket).
#
# Set TS_REGTEST_COMPAT=0 to disable 1-3 (to see the raw failures).

use strict;
use warnings;

my $enabled = !defined($ENV{TS_REGTEST_COMPAT}) || $ENV{TS_REGTEST_COMPAT} ne '0';

# ---- hstest.pm (the suite's own helper), loaded from the suite's common/ dir ----------------------
my $common = $ENV{HS_REGTEST_COMMON} || '../common';
push @INC, $common unless grep { $_ eq $common } @INC;
require hstest;

{
  no warnings 'redefine';
  my $orig_get_hs_connection = \&hstest::get_hs_connection;
  *hstest::get_hs_connection = sub {
    my ($host, $port) = @_;
    if (defined($port) && $port == 9999 && $ENV{HSPORT_WR}) {
      $port = $ENV{HSPORT_WR};
    }
    $host ||= $ENV{HSHOST} if $ENV{HSHOST};
    return $orig_get_hs_connection->($host, $port);
  };

  # hstest::get_dbi_connection always puts a port in the DSN, which DBD::MariaDB rejects for a
  # unix socket; with MYSOCKET set, connect through that socket (same options otherwise).
  if ($ENV{MYSOCKET}) {
    *hstest::get_dbi_connection = sub {
      my %c = %hstest::conf;
      my $dsn = "DBI:MariaDB:database=;mariadb_socket=$ENV{MYSOCKET}"
        . ";mariadb_server_prepare=" . (defined($c{ssps}) ? $c{ssps} : '')
        . ";mariadb_read_default_group=perl"
        . ";mariadb_read_default_file=../common/binary_my.cnf";
      return DBI->connect($dsn, $c{user}, $c{pass}, { RaiseError => 1 });
    };
  }
}

if ($enabled) {
  no warnings 'redefine';

  # ---- 1. binary-safe DBI parameters ---------------------------------------------------------
  require DBI;
  my $orig_execute = \&DBI::st::execute;
  *DBI::st::execute = sub {
    my ($sth, @args) = @_;
    if (@args && grep { defined($_) && !ref($_) && !utf8::is_utf8($_) && /[\x80-\xff]/ } @args) {
      for my $i (0 .. $#args) {
        my $v = $args[$i];
        if (defined($v) && !ref($v) && !utf8::is_utf8($v) && $v =~ /[\x80-\xff]/) {
          $sth->bind_param($i + 1, $v, DBI::SQL_VARBINARY());
        } else {
          $sth->bind_param($i + 1, $v);
        }
      }
      return $orig_execute->($sth);
    }
    return $orig_execute->(@_);
  };

  # ---- 2. truncating BigInt division -----------------------------------------------------------
  require Math::BigInt;
  if (Math::BigInt->can('btdiv')) {
    # At run time, after Math::BigInt's own `use overload`, so that ours wins.
    eval q{
      package Math::BigInt;
      use overload
        '/' => sub {
          my ($x, $y, $swap) = @_;
          ($x, $y) = (ref($x)->new($y), $x) if $swap;
          return scalar $x->copy()->btdiv($y);
        },
        '/=' => sub {
          my ($x, $y) = @_;
          return scalar $x->btdiv($y);
        };
      1;
    } or die "TSRegtestCompat: cannot override Math::BigInt division: $@";
  }

  # ---- 3. writable NULLs in Net::HandlerSocket results -----------------------------------------
  require Net::HandlerSocket;
  my $copy1 = sub { my $r = shift; return ref($r) eq 'ARRAY' ? [ map { $_ } @$r ] : $r; };
  for my $m (qw(execute_single execute_find execute_update execute_delete execute_insert)) {
    my $orig = Net::HandlerSocket->can($m) or next;
    no strict 'refs';
    *{"Net::HandlerSocket::$m"} = sub { return $copy1->($orig->(@_)); };
  }
  if (my $orig = Net::HandlerSocket->can('execute_multi')) {
    *Net::HandlerSocket::execute_multi = sub {
      my $r = $orig->(@_);
      return ref($r) eq 'ARRAY' ? [ map { $copy1->($_) } @$r ] : $r;
    };
  }
}

1;
