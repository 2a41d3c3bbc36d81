/* Tests for the HandlerSocket request parser (hs_parser.cc). */
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "proto/hs/hs_protocol.h"

namespace tablesocket {
namespace hs {
namespace {

using namespace std::string_literals;

/* ---- helpers ---------------------------------------------------------------------------------- */

std::string quote(std::string_view s) {
  static const char hex[] = "0123456789abcdef";
  std::string r = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      r += '\\';
      r += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      r += "\\x";
      r += hex[c >> 4];
      r += hex[c & 15];
    } else {
      r += static_cast<char>(c);
    }
  }
  return r + "\"";
}

std::string quote(const Value &v) { return v.is_null() ? "NULL" : quote(v.view()); }

std::string quote_list(const Value *v, uint32_t n) {
  std::string r = "[";
  for (uint32_t i = 0; i < n; ++i) {
    if (i) r += ",";
    r += quote(v[i]);
  }
  return r + "]";
}

const char *exec_op_name(Exec_op op) {
  switch (op) {
    case Exec_op::eq: return "eq";
    case Exec_op::gt: return "gt";
    case Exec_op::ge: return "ge";
    case Exec_op::lt: return "lt";
    case Exec_op::le: return "le";
    case Exec_op::insert: return "insert";
    case Exec_op::last_prefix: return "last_prefix";
    case Exec_op::upsert: return "upsert";
    case Exec_op::merge_desc: return "merge_desc";
    case Exec_op::merge_asc: return "merge_asc";
  }
  return "?";
}

const char *compare_op_name(Compare_op op) {
  switch (op) {
    case Compare_op::eq: return "=";
    case Compare_op::ne: return "!=";
    case Compare_op::lt: return "<";
    case Compare_op::le: return "<=";
    case Compare_op::gt: return ">";
    case Compare_op::ge: return ">=";
  }
  return "?";
}

const char *mod_op_name(Modify_op op) {
  switch (op) {
    case Modify_op::none: return "none";
    case Modify_op::update: return "U";
    case Modify_op::increment: return "+";
    case Modify_op::decrement: return "-";
    case Modify_op::remove: return "D";
  }
  return "?";
}

/* A canonical one-line description of a parsed request, so tables can state expected fields. */
std::string describe(const Request &rq) {
  std::string r;
  switch (rq.command) {
    case Command::open_index: {
      const Open_index_request &o = rq.open;
      r = "open id=" + std::to_string(o.index_id) + " db=" + quote(o.db) + " table=" +
          quote(o.table) + " index=" + quote(o.index) + " columns=" + quote(o.columns) +
          " fcolumns=" + quote(o.filter_columns);
      break;
    }
    case Command::auth:
      r = "auth type=" + quote(rq.auth.type) + " args=" + quote_list(rq.auth.args, rq.auth.nargs);
      break;
    case Command::exec: {
      const Exec_request &e = rq.exec;
      r = "exec id=" + std::to_string(e.index_id) + " op=" + exec_op_name(e.op) +
          " keys=" + quote_list(e.keys, e.nkeys);
      if (e.has_limit)
        r += " limit=" + std::to_string(e.limit) + " offset=" + std::to_string(e.offset);
      else if (e.limit != 1 || e.offset != 0)
        r += " BAD-DEFAULT-LIMIT";
      if (e.has_in && e.in_from_index)
        r += " in@" + std::to_string(e.in_column) + "=^" + std::to_string(e.in_index_id) +
             quote_list(e.in_keys, e.nin_keys) + "/" + std::to_string(e.in_limit);
      else if (e.has_in)
        r += " in@" + std::to_string(e.in_column) + "=" + quote_list(e.in_values, e.nin_values);
      for (uint32_t i = 0; i < e.nfilters; ++i) {
        const Filter &f = e.filters[i];
        r += f.type == Filter_type::skip ? " F" : " W";
        r += std::string(" ") + compare_op_name(f.op) + " " + std::to_string(f.column) + " " +
             quote(f.value);
      }
      if (e.mod != Modify_op::none) {
        r += std::string(" mod=") + mod_op_name(e.mod) + (e.mod_returns_rows ? "?" : "") + " " +
             quote_list(e.mod_values, e.nmod_values);
      }
      break;
    }
  }
  return r;
}

const char *status_name(Parse_status s) {
  switch (s) {
    case Parse_status::complete: return "complete";
    case Parse_status::need_more: return "need_more";
    case Parse_status::error: return "error";
    case Parse_status::fatal: return "fatal";
  }
  return "?";
}

/* ---- valid requests: every prefix needs more, the whole line parses to the expected fields ----- */

struct Valid_case {
  const char *name;
  std::string input;     // exactly one request line, through its LF
  std::string expected;  // describe() of the parsed request
};

void PrintTo(const Valid_case &c, std::ostream *os) { *os << c.name; }

const std::vector<Valid_case> &valid_cases() {
  static const std::vector<Valid_case> cases = {
      {"open_index_with_primary_and_columns", "P\t1\ttest\tt1\tPRIMARY\tk,v\n",
       R"(open id=1 db="test" table="t1" index="PRIMARY" columns="k,v" fcolumns="")"},
      {"open_index_with_filter_columns", "P\t4294967295\tdb\ttbl\tidx\ta,b\tc,d\n",
       R"(open id=4294967295 db="db" table="tbl" index="idx" columns="a,b" fcolumns="c,d")"},
      {"open_index_with_empty_index_and_columns", "P\t0\tdb\ttbl\t\t\n",
       R"(open id=0 db="db" table="tbl" index="" columns="" fcolumns="")"},
      {"open_index_without_index_or_columns", "P\t7\tdb\ttbl\n",
       R"(open id=7 db="db" table="tbl" index="" columns="" fcolumns="")"},
      {"open_index_with_an_empty_trailing_fcolumns", "P\t2\td\tt\t3\tc\t\n",
       R"(open id=2 db="d" table="t" index="3" columns="c" fcolumns="")"},
      {"open_index_with_a_trailing_tab_after_the_fcolumns", "P\t2\td\tt\t3\tc\tf\t\n",
       R"(open id=2 db="d" table="t" index="3" columns="c" fcolumns="f")"},
      {"open_index_with_trailing_tabs_after_empty_fcolumns", "P\t2\td\tt\t3\tc\t\t\t\n",
       R"(open id=2 db="d" table="t" index="3" columns="c" fcolumns="")"},
      {"open_index_names_are_taken_verbatim", "P\t3\td\x01\x40\tt\tPRIMARY\ta\n"s,
       R"(open id=3 db="d\x01@" table="t" index="PRIMARY" columns="a" fcolumns="")"},
      {"auth_with_a_secret", "A\t1\tsecret\n", R"(auth type="1" args=["secret"])"},
      {"auth_without_a_type", "A\n", R"(auth type="" args=[])"},
      {"auth_args_are_unescaped", "A\t1\t\x01\x49x\t\t\0\n"s,
       R"(auth type="1" args=["\x09x","",NULL])"},
      {"auth_type_is_taken_verbatim", "A\t2\n", R"(auth type="2" args=[])"},
      {"find_equal_one_key", "1\t=\t1\t42\n", R"(exec id=1 op=eq keys=["42"])"},
      {"find_with_leading_zero_index_id", "01\t=\t1\tk\n", R"(exec id=1 op=eq keys=["k"])"},
      {"find_max_index_id", "4294967295\t<=\t1\tk\n", R"(exec id=4294967295 op=le keys=["k"])"},
      {"find_greater_equal_with_limit_and_offset", "1\t>=\t2\ta\tb\t10\t5\n",
       R"(exec id=1 op=ge keys=["a","b"] limit=10 offset=5)"},
      {"find_greater_with_zero_limit", "1\t>\t1\ta\t0\t0\n",
       R"(exec id=1 op=gt keys=["a"] limit=0 offset=0)"},
      {"find_less_with_limit_only", "1\t<\t1\tz\t100\n",
       R"(exec id=1 op=lt keys=["z"] limit=100 offset=0)"},
      {"find_with_max_limit_and_offset", "1\t=\t1\tk\t4294967295\t4294967295\n",
       R"(exec id=1 op=eq keys=["k"] limit=4294967295 offset=4294967295)"},
      /* Empty tokens ending the line after the values, the limit or the offset: ignored, as
         HandlerSocket ignores them (a trailing tab). */
      {"trailing_empty_tokens_after_the_values", "1\t=\t1\tk\t\t\n", R"(exec id=1 op=eq keys=["k"])"},
      {"trailing_tab_after_the_limit", "1\t>=\t1\t0\t5\t\n", R"(exec id=1 op=ge keys=["0"] limit=5 offset=0)"},
      {"trailing_tab_after_the_offset", "1\t=\t1\tk\t1\t0\t\n", R"(exec id=1 op=eq keys=["k"] limit=1 offset=0)"},
      {"trailing_tab_after_a_filter", "1\t=\t1\tk\tF\t=\t0\tv\t\n",
       R"(exec id=1 op=eq keys=["k"] F = 0 "v")"},
      {"an_empty_last_update_value_is_a_value", "1\t=\t1\tk\t1\t0\tU\t\n",
       R"(exec id=1 op=eq keys=["k"] limit=1 offset=0 mod=U [""])"},
      {"insert_with_null_and_empty_values", "1\t+\t3\ta\t\0\t\n"s,
       R"(exec id=1 op=insert keys=["a",NULL,""])"},
      {"upsert_extension", "1\t+=\t2\tk\tv\n", R"(exec id=1 op=upsert keys=["k","v"])"},
      {"last_prefix_extension", "1\tL\t1\tuser7\t20\t0\n",
       R"(exec id=1 op=last_prefix keys=["user7"] limit=20 offset=0)"},
      {"merge_newest_first_over_an_in_list", "1\tM-\t1\t0\t20\t0\t@\t0\t3\t7\t8\t9\n",
       R"(exec id=1 op=merge_desc keys=["0"] limit=20 offset=0 in@0=["7","8","9"])"},
      {"merge_oldest_first_with_a_bound", "1\tM+\t2\t0\t500\t20\t0\t@\t0\t1\t7\n",
       R"(exec id=1 op=merge_asc keys=["0","500"] limit=20 offset=0 in@0=["7"])"},
      {"merge_with_groups_from_another_index", "1\tM-\t1\t0\t20\t0\t@\t0\t^\t3\t1\tu5\t1000\n",
       R"(exec id=1 op=merge_desc keys=["0"] limit=20 offset=0 in@0=^3["u5"]/1000)"},
      {"in_list_as_the_real_client_sends_it", "1\t=\t1\t\t10\t0\t@\t0\t3\ta\tb\tc\n",
       R"(exec id=1 op=eq keys=[""] limit=10 offset=0 in@0=["a","b","c"])"},
      {"in_list_after_a_limit_without_offset", "1\t=\t1\tk\t5\t@\t0\t1\tx\n",
       R"(exec id=1 op=eq keys=["k"] limit=5 offset=0 in@0=["x"])"},
      {"in_list_without_limit", "1\t=\t2\tk\tl\t@\t1\t2\t\0\t\n"s,
       R"(exec id=1 op=eq keys=["k","l"] in@1=[NULL,""])"},
      {"filters_skip_and_stop", "1\t>\t1\t0\t10\t0\tF\t!=\t1\tx\tW\t<=\t0\t\0\n"s,
       R"(exec id=1 op=gt keys=["0"] limit=10 offset=0 F != 1 "x" W <= 0 NULL)"},
      {"filters_with_every_compare_op",
       "1\t=\t1\tk\t1\t0\tF\t=\t0\ta\tF\t!=\t1\tb\tW\t<\t2\tc\tW\t<=\t3\td\tF\t>\t4\te\tF\t>=\t5\tf\n",
       R"(exec id=1 op=eq keys=["k"] limit=1 offset=0 F = 0 "a" F != 1 "b" W < 2 "c" W <= 3 "d" F > 4 "e" F >= 5 "f")"},
      {"filter_without_limit", "1\t=\t1\tk\tF\t=\t0\tv\n",
       R"(exec id=1 op=eq keys=["k"] F = 0 "v")"},
      {"filter_value_is_unescaped", "1\t=\t1\tk\tF\t=\t0\t\x01\x4a\n"s,
       R"(exec id=1 op=eq keys=["k"] F = 0 "\x0a")"},
      {"update_with_values", "1\t=\t1\tk\t1\t0\tU\tnew\t\0\n"s,
       R"(exec id=1 op=eq keys=["k"] limit=1 offset=0 mod=U ["new",NULL])"},
      {"update_without_limit", "1\t=\t1\tk\tU\tv\n", R"(exec id=1 op=eq keys=["k"] mod=U ["v"])"},
      {"delete_returning_rows_without_values", "1\t=\t1\tk\t1\t0\tD?\n",
       R"(exec id=1 op=eq keys=["k"] limit=1 offset=0 mod=D? [])"},
      {"delete_without_values", "1\t=\t1\tk\t1\t0\tD\n",
       R"(exec id=1 op=eq keys=["k"] limit=1 offset=0 mod=D [])"},
      {"increment_returning_rows", "1\t=\t1\tk\t1\t0\t+?\t5\n",
       R"(exec id=1 op=eq keys=["k"] limit=1 offset=0 mod=+? ["5"])"},
      {"decrement", "1\t=\t1\tk\t1\t0\t-\t5\n",
       R"(exec id=1 op=eq keys=["k"] limit=1 offset=0 mod=- ["5"])"},
      {"update_returning_rows_with_empty_values", "1\t=\t1\tk\t1\t0\tU?\t\t\n",
       R"(exec id=1 op=eq keys=["k"] limit=1 offset=0 mod=U? ["",""])"},
      {"mod_values_may_look_like_anything", "1\t=\t1\tk\t1\t0\tU\t@\tF\tU\t9\n",
       R"(exec id=1 op=eq keys=["k"] limit=1 offset=0 mod=U ["@","F","U","9"])"},
      {"in_list_filters_and_mod_together",
       "2\t>=\t2\ta\t\0\t50\t10\t@\t1\t2\tx\ty\tF\t>\t0\t7\tW\t=\t1\t\tU?\tm1\t\x01\x40\n"s,
       R"(exec id=2 op=ge keys=["a",NULL] limit=50 offset=10 in@1=["x","y"] F > 0 "7" W = 1 "" mod=U? ["m1","\x00"])"},
      {"escaped_key_bytes", "1\t=\t1\ta\x01\x40" "b\x01\x4a\x01\x4f\n"s,
       R"(exec id=1 op=eq keys=["a\x00b\x0a\x0f"])"},
      {"escape_of_a_byte_above_0x4f_is_shifted_too", "1\t=\t1\t\x01\x50\n"s,
       R"(exec id=1 op=eq keys=["\x10"])"},
      {"unescaped_low_bytes_are_kept", "1\t=\t1\ta\x02\x0b\x0c\n"s,
       R"(exec id=1 op=eq keys=["a\x02\x0b\x0c"])"},
      {"two_nul_bytes_are_a_string_not_null", "1\t=\t1\t\0\0\n"s,
       R"(exec id=1 op=eq keys=["\x00\x00"])"},
      {"escaped_nul_is_a_string_not_null", "1\t=\t1\t\x01\x40\n"s,
       R"(exec id=1 op=eq keys=["\x00"])"},
      {"crlf_line_ending", "1\t=\t1\tk\r\n", R"(exec id=1 op=eq keys=["k"])"},
      {"only_the_last_cr_is_dropped", "1\t=\t1\tk\r\r\n", R"(exec id=1 op=eq keys=["k\x0d"])"},
      {"open_index_with_crlf", "P\t1\tdb\tt\tPRIMARY\ta\r\n",
       R"(open id=1 db="db" table="t" index="PRIMARY" columns="a" fcolumns="")"},
      {"empty_trailing_key_before_crlf", "1\t=\t2\tk\t\r\n", R"(exec id=1 op=eq keys=["k",""])"},
      {"long_values_cross_vector_blocks",
       "1\t+\t3\t0123456789abcdefghijklmnopqrstuvwxyz\t\x01\x40" "0123456789abcdef\x01\x41\tx\n"s,
       R"(exec id=1 op=insert keys=["0123456789abcdefghijklmnopqrstuvwxyz","\x000123456789abcdef\x01","x"])"},
  };
  return cases;
}

class AValidRequest : public ::testing::TestWithParam<Valid_case> {};

TEST_P(AValidRequest, EveryStrictPrefixNeedsMoreAndLeavesTheBufferUnchanged) {
  const Valid_case &c = GetParam();
  for (size_t k = 0; k < c.input.size(); ++k) {
    /* The whole request is in memory, but only k bytes are offered: the rest must not be read. */
    std::string buf = c.input;
    Parse_scratch scratch;
    Request rq;
    const Parse_result r = parse_request(buf.data(), k, Limits(), scratch, &rq);
    ASSERT_EQ(status_name(r.status), std::string("need_more")) << "prefix length " << k;
    ASSERT_EQ(buf, c.input) << "prefix length " << k << " modified the buffer";
  }
}

TEST_P(AValidRequest, TheWholeLineParsesToTheExpectedFields) {
  const Valid_case &c = GetParam();
  std::string buf = c.input;
  Parse_scratch scratch;
  Request rq;
  const Parse_result r = parse_request(buf.data(), buf.size(), Limits(), scratch, &rq);
  ASSERT_EQ(status_name(r.status), std::string("complete"))
      << (r.error_message ? r.error_message : "");
  EXPECT_EQ(r.consumed, c.input.size());
  EXPECT_EQ(describe(rq), c.expected);
}

TEST_P(AValidRequest, ParsesTheSameWhenFollowedByAnotherRequest) {
  const Valid_case &c = GetParam();
  std::string buf = c.input + "9\t=\t1\tnext\n";
  Parse_scratch scratch;
  Request rq;
  Parse_result r = parse_request(buf.data(), buf.size(), Limits(), scratch, &rq);
  ASSERT_EQ(status_name(r.status), std::string("complete"));
  EXPECT_EQ(r.consumed, c.input.size());
  EXPECT_EQ(describe(rq), c.expected);
  r = parse_request(buf.data() + r.consumed, buf.size() - r.consumed, Limits(), scratch, &rq);
  ASSERT_EQ(status_name(r.status), std::string("complete"));
  EXPECT_EQ(describe(rq), R"(exec id=9 op=eq keys=["next"])");
}

TEST_P(AValidRequest, DecodedValuesPointIntoTheCallersBuffer) {
  const Valid_case &c = GetParam();
  std::string buf = c.input;
  Parse_scratch scratch;
  Request rq;
  ASSERT_EQ(parse_request(buf.data(), buf.size(), Limits(), scratch, &rq).status,
            Parse_status::complete);
  const char *lo = buf.data(), *hi = buf.data() + buf.size();
  auto inside = [&](const Value *v, uint32_t n) {
    for (uint32_t i = 0; i < n; ++i)
      if (!v[i].is_null()) {
        EXPECT_GE(v[i].ptr, lo);
        EXPECT_LE(v[i].ptr + v[i].len, hi);
      }
  };
  if (rq.command == Command::exec) {
    inside(rq.exec.keys, rq.exec.nkeys);
    inside(rq.exec.in_values, rq.exec.nin_values);
    inside(rq.exec.in_keys, rq.exec.nin_keys);
    inside(rq.exec.mod_values, rq.exec.nmod_values);
    for (uint32_t i = 0; i < rq.exec.nfilters; ++i) inside(&rq.exec.filters[i].value, 1);
  } else if (rq.command == Command::auth) {
    inside(rq.auth.args, rq.auth.nargs);
  }
}

INSTANTIATE_TEST_SUITE_P(HsParser, AValidRequest, ::testing::ValuesIn(valid_cases()),
                         [](const ::testing::TestParamInfo<Valid_case> &i) {
                           return std::string(i.param.name);
                         });

/* ---- malformed requests ------------------------------------------------------------------------- */

struct Malformed_case {
  const char *name;
  std::string input;
  Parse_status status;
  uint32_t code;
  const char *message;
  size_t consumed;  // SIZE_MAX: the whole input
};

void PrintTo(const Malformed_case &c, std::ostream *os) { *os << c.name; }

constexpr size_t kAll = SIZE_MAX;
constexpr Parse_status kError = Parse_status::error;

const std::vector<Malformed_case> &malformed_cases() {
  static const std::vector<Malformed_case> cases = {
      {"empty_line", "\n", kError, 2, "cmd", kAll},
      {"empty_line_with_cr", "\r\n", kError, 2, "cmd", kAll},
      {"empty_command_token", "\tfoo\n", kError, 2, "cmd", kAll},
      {"unknown_command", "X\t1\n", kError, 2, "cmd", kAll},
      {"lowercase_open_command", "p\t1\tdb\tt\n", kError, 2, "cmd", kAll},
      {"open_command_longer_than_one_letter", "PX\t1\tdb\tt\n", kError, 2, "cmd", kAll},
      {"auth_command_longer_than_one_letter", "AA\t1\n", kError, 2, "cmd", kAll},
      {"lone_cr_is_a_command_token", "\r\r\n", kError, 2, "cmd", kAll},
      {"open_without_index_id", "P\n", kError, 2, "indexid", kAll},
      {"open_with_non_numeric_index_id", "P\tx\tdb\tt\n", kError, 2, "indexid", kAll},
      {"open_with_empty_index_id", "P\t\tdb\tt\n", kError, 2, "indexid", kAll},
      {"open_with_signed_index_id", "P\t-1\tdb\tt\n", kError, 2, "indexid", kAll},
      {"open_with_overflowing_index_id", "P\t4294967296\tdb\tt\n", kError, 2, "indexid", kAll},
      {"open_without_db", "P\t1\n", kError, 2, "dbname", kAll},
      {"open_without_table", "P\t1\tdb\n", kError, 2, "tablename", kAll},
      {"open_with_extra_tokens", "P\t1\tdb\tt\ti\tc\tf\textra\n", kError, 2, "syntax", kAll},
      {"open_with_an_extra_token_then_a_tab", "P\t1\tdb\tt\ti\tc\tf\textra\t\n", kError, 2, "syntax", kAll},
      {"exec_index_id_with_letters", "1x\t=\t1\tk\n", kError, 2, "indexid", kAll},
      {"exec_index_id_overflows", "99999999999\t=\t1\tk\n", kError, 2, "indexid", kAll},
      {"exec_without_op", "1\n", kError, 2, "op", kAll},
      {"exec_with_empty_op", "1\t\t1\tk\n", kError, 2, "op", kAll},
      {"exec_with_unknown_op", "1\t==\t1\tk\n", kError, 2, "op", kAll},
      {"exec_with_not_equal_op", "1\t!=\t1\tk\n", kError, 2, "op", kAll},
      {"exec_with_lowercase_last_op", "1\tl\t1\tk\n", kError, 2, "op", kAll},
      {"exec_without_vlen", "1\t=\n", kError, 2, "klen", kAll},
      {"exec_with_zero_vlen", "1\t=\t0\n", kError, 2, "klen", kAll},
      {"exec_with_non_numeric_vlen", "1\t=\tx\tk\n", kError, 2, "klen", kAll},
      {"exec_with_signed_vlen", "1\t=\t-1\tk\n", kError, 2, "klen", kAll},
      {"exec_vlen_larger_than_the_values_sent", "1\t=\t2\tk\n", kError, 2, "klen", kAll},
      {"exec_with_huge_vlen", "1\t=\t4294967295\tk\n", kError, 2, "klen", kAll},
      {"exec_with_overflowing_vlen", "1\t=\t99999999999\tk\n", kError, 2, "klen", kAll},
      {"exec_with_overflowing_limit", "1\t=\t1\tk\t4294967296\n", kError, 2, "limit", kAll},
      {"exec_with_negative_limit", "1\t>=\t1\t0\t-1\t-1\n", kError, 2, "limit", kAll},
      {"exec_with_negative_offset", "1\t>=\t1\t0\t5\t-1\n", kError, 2, "offset", kAll},
      {"exec_with_overflowing_offset", "1\t=\t1\tk\t1\t4294967296\n", kError, 2, "offset", kAll},
      {"exec_with_three_numbers_after_the_values", "1\t=\t1\tk\t1\t2\t3\n", kError, 2, "modop", kAll},
      {"in_without_column", "1\t=\t1\tk\t1\t0\t@\n", kError, 2, "incol", kAll},
      {"in_with_non_numeric_column", "1\t=\t1\tk\t1\t0\t@\tx\t1\tv\n", kError, 2, "incol", kAll},
      {"in_without_length", "1\t=\t1\tk\t1\t0\t@\t0\n", kError, 2, "invalueslen", kAll},
      {"in_source_without_an_index_id", "1\tM-\t1\t0\t5\t0\t@\t0\t^\n", kError, 2, "insource", kAll},
      {"in_source_without_a_limit", "1\tM-\t1\t0\t5\t0\t@\t0\t^\t3\t1\tu5\n", kError, 2, "insource", kAll},
      /* found by a long fuzzing run: the key count as the last token made the bound check wrap */
      {"in_source_key_count_is_the_last_token", "1\tM-\t1\t0\t5\t0\t@\t0\t^\t3\t1\n", kError, 2, "insource", kAll},
      {"in_source_key_count_is_the_last_token_large", "1\tM-\t1\t0\t5\t0\t@\t0\t^\t3\t4000000000\n", kError, 2, "insource", kAll},
      {"in_source_with_zero_keys", "1\tM-\t1\t0\t5\t0\t@\t0\t^\t3\t0\t10\n", kError, 2, "insource", kAll},
      {"in_source_with_a_zero_limit", "1\tM-\t1\t0\t5\t0\t@\t0\t^\t3\t1\tu5\t0\n", kError, 2, "insource", kAll},
      {"in_with_zero_length", "1\t=\t1\tk\t1\t0\t@\t0\t0\n", kError, 2, "invalueslen", kAll},
      {"in_longer_than_the_values_sent", "1\t=\t1\tk\t1\t0\t@\t0\t2\tv\n", kError, 2, "invalueslen",
       kAll},
      {"in_with_huge_length", "1\t=\t1\tk\t1\t0\t@\t0\t99999999\tv\n", kError, 2, "invalueslen", kAll},
      {"in_with_overflowing_length", "1\t=\t1\tk\t@\t0\t99999999999\tv\n", kError, 2, "invalueslen",
       kAll},
      {"second_in_list", "1\t=\t1\tk\t1\t0\t@\t0\t1\tv\t@\t0\t1\tw\n", kError, 2, "modop", kAll},
      {"in_list_after_a_filter", "1\t=\t1\tk\t1\t0\tF\t=\t0\tv\t@\t0\t1\tw\n", kError, 2, "modop",
       kAll},
      {"filter_type_longer_than_one_letter", "1\t=\t1\tk\t1\t0\tFX\t=\t0\tv\n", kError, 2,
       "filtertype", kAll},
      {"stop_filter_type_longer_than_one_letter", "1\t=\t1\tk\tWhile\t=\t0\tv\n", kError, 2,
       "filtertype", kAll},
      {"filter_without_op", "1\t=\t1\tk\t1\t0\tF\n", kError, 2, "filterop", kAll},
      {"filter_with_unknown_op", "1\t=\t1\tk\t1\t0\tF\t==\t0\tv\n", kError, 2, "filterop", kAll},
      {"filter_with_a_lone_bang_op", "1\t=\t1\tk\tF\t!\t0\tv\n", kError, 2, "filterop", kAll},
      {"filter_with_not_equal_spelled_wrong", "1\t=\t1\tk\t1\t0\tW\t<>\t0\tv\n", kError, 2,
       "filterop", kAll},
      {"filter_without_column", "1\t=\t1\tk\t1\t0\tF\t=\n", kError, 2, "filterfld", kAll},
      {"filter_with_non_numeric_column", "1\t=\t1\tk\t1\t0\tF\t=\tx\tv\n", kError, 2, "filterfld",
       kAll},
      {"filter_without_value", "1\t=\t1\tk\t1\t0\tF\t=\t0\n", kError, 2, "filterval", kAll},
      {"second_filter_cut_short", "1\t=\t1\tk\tF\t=\t0\tv\tW\t<\t1\n", kError, 2, "filterval", kAll},
      {"unknown_mod_op", "1\t=\t1\tk\t1\t0\tX\n", kError, 2, "modop", kAll},
      {"mod_op_with_wrong_suffix", "1\t=\t1\tk\t1\t0\tU!\n", kError, 2, "modop", kAll},
      {"mod_op_with_two_question_marks", "1\t=\t1\tk\t1\t0\tU??\n", kError, 2, "modop", kAll},
      {"lone_question_mark_mod_op", "1\t=\t1\tk\t1\t0\t?\n", kError, 2, "modop", kAll},
      {"empty_token_between_the_values_and_a_mod_op", "1\t=\t1\tk\t\tU\tv\n", kError, 2, "modop", kAll},
      {"empty_token_after_the_offset_then_more", "1\t=\t1\tk\t1\t0\t\tU\n", kError, 2, "modop", kAll},
      {"key_ending_in_a_lone_escape_byte", "1\t=\t1\tk\x01\n", kError, 2, "escape", kAll},
      {"escape_byte_before_a_byte_below_0x40", "1\t=\t1\tk\t1\t0\tU\tab\x01 cd\n", kError, 2, "escape", kAll},
      {"malformed_escape_in_an_in_value", "1\t=\t1\tk\t1\t0\t@\t0\t2\tv\t\x01\x01\n", kError, 2, "escape",
       kAll},
      {"malformed_escape_in_a_filter_value", "1\t=\t1\tk\t1\t0\tF\t=\t0\t\x01\n", kError, 2, "escape", kAll},
      {"malformed_escape_in_an_auth_secret", "A\t1\ts\x01\n", kError, 2, "escape", kAll},
      {"error_consumes_only_its_own_line", "1\t=\t0\n1\t=\t1\tk\n", kError, 2, "klen", 6},
      {"error_consumes_its_crlf", "X\r\n1\t=\t1\tk\n", kError, 2, "cmd", 3},
      {"error_line_before_an_incomplete_line", "1\tfoo\n1\t=", kError, 2, "op", 6},
  };
  return cases;
}

class AMalformedRequest : public ::testing::TestWithParam<Malformed_case> {};

TEST_P(AMalformedRequest, IsRejectedWithTheExpectedReplyAndConsumedLength) {
  const Malformed_case &c = GetParam();
  std::string buf = c.input;
  Parse_scratch scratch;
  Request rq;
  const Parse_result r = parse_request(buf.data(), buf.size(), Limits(), scratch, &rq);
  ASSERT_EQ(status_name(r.status), std::string(status_name(c.status)));
  EXPECT_EQ(r.error_code, c.code);
  ASSERT_NE(r.error_message, nullptr);
  EXPECT_STREQ(r.error_message, c.message);
  EXPECT_EQ(r.consumed, c.consumed == kAll ? c.input.size() : c.consumed);
}

TEST_P(AMalformedRequest, EveryPrefixWithoutTheLfNeedsMore) {
  const Malformed_case &c = GetParam();
  const size_t line_end = c.input.find('\n');
  for (size_t k = 0; k <= line_end; ++k) {
    std::string buf = c.input;
    Parse_scratch scratch;
    Request rq;
    const Parse_result r = parse_request(buf.data(), k, Limits(), scratch, &rq);
    ASSERT_EQ(status_name(r.status), std::string("need_more")) << "prefix length " << k;
    ASSERT_EQ(buf, c.input);
  }
}

INSTANTIATE_TEST_SUITE_P(HsParser, AMalformedRequest, ::testing::ValuesIn(malformed_cases()),
                         [](const ::testing::TestParamInfo<Malformed_case> &i) {
                           return std::string(i.param.name);
                         });

/* ---- connection-like behaviour ------------------------------------------------------------------ */

struct Step {
  Parse_status status;
  std::string expected;  // describe() for complete, the message for error/fatal
};

/* Parses buf as a connection would: consume each line, stop at need_more or fatal. */
std::vector<Step> run_connection(std::string &buf, const Limits &limits, size_t *left = nullptr) {
  std::vector<Step> steps;
  Parse_scratch scratch;
  size_t off = 0;
  for (;;) {
    Request rq;
    const Parse_result r = parse_request(buf.data() + off, buf.size() - off, limits, scratch, &rq);
    if (r.status == Parse_status::complete) {
      steps.push_back({r.status, describe(rq)});
    } else if (r.status == Parse_status::need_more) {
      steps.push_back({r.status, ""});
      break;
    } else {
      steps.push_back({r.status, r.error_message ? r.error_message : "(null)"});
      if (r.status == Parse_status::fatal) break;
    }
    off += r.consumed;
  }
  if (left) *left = buf.size() - off;
  return steps;
}

std::string render(const std::vector<Step> &steps) {
  std::string r;
  for (const Step &s : steps) r += std::string(status_name(s.status)) + " " + s.expected + "\n";
  return r;
}

TEST(HsParser, PipelinedRequestsParseOneAfterAnother) {
  std::string buf =
      "P\t1\tdb\tt\tPRIMARY\tk,v\n"
      "1\t=\t1\ta\n"
      "1\t+\t2\tb\t\0\r\n"
      "bad\n"
      "1\t>\t1\tc\t10\t0\tF\t=\t0\tx\tU?\ty\n"
      "A\t1\tpw\n"
      "1\t="s;
  size_t left = 0;
  const std::vector<Step> steps = run_connection(buf, Limits(), &left);
  EXPECT_EQ(render(steps),
            "complete open id=1 db=\"db\" table=\"t\" index=\"PRIMARY\" columns=\"k,v\" fcolumns=\"\"\n"
            "complete exec id=1 op=eq keys=[\"a\"]\n"
            "complete exec id=1 op=insert keys=[\"b\",NULL]\n"
            "error cmd\n"
            "complete exec id=1 op=gt keys=[\"c\"] limit=10 offset=0 F = 0 \"x\" mod=U? [\"y\"]\n"
            "complete auth type=\"1\" args=[\"pw\"]\n"
            "need_more \n");
  EXPECT_EQ(left, 3u);
  EXPECT_EQ(buf.substr(buf.size() - 3), "1\t=");
}

TEST(HsParser, AnErrorInTheMiddleOfAPipelineDoesNotDisturbTheNextRequests) {
  std::string buf = "1\t=\t1\ta\n1\t=\t5\tb\n\n1\t=\t1\tc\n";
  EXPECT_EQ(render(run_connection(buf, Limits())),
            "complete exec id=1 op=eq keys=[\"a\"]\n"
            "error klen\n"
            "error cmd\n"
            "complete exec id=1 op=eq keys=[\"c\"]\n"
            "need_more \n");
}

TEST(HsParser, ARequestSplitAcrossReadsParsesOnceItsLfArrives) {
  const std::string request = "1\t>=\t2\ta\x01\x40\tb\t10\t5\tF\t<\t0\tz\r\n"s;
  for (size_t split = 0; split <= request.size(); ++split) {
    /* Simulate a connection buffer that first holds `split` bytes, then the rest. */
    std::string buf = request;
    Parse_scratch scratch;
    Request rq;
    Parse_result r = parse_request(buf.data(), split, Limits(), scratch, &rq);
    if (split < request.size()) {
      ASSERT_EQ(r.status, Parse_status::need_more);
      r = parse_request(buf.data(), buf.size(), Limits(), scratch, &rq);
    }
    ASSERT_EQ(r.status, Parse_status::complete);
    EXPECT_EQ(describe(rq),
              R"(exec id=1 op=ge keys=["a\x00","b"] limit=10 offset=5 F < 0 "z")");
  }
}

TEST(HsParser, NullIsALoneNulByteAndEverythingElseIsAString) {
  std::string buf = "1\t+\t5\t\t\0\t\0\0\t\x01\x40\tx\0\n"s;
  Parse_scratch scratch;
  Request rq;
  ASSERT_EQ(parse_request(buf.data(), buf.size(), Limits(), scratch, &rq).status,
            Parse_status::complete);
  ASSERT_EQ(rq.exec.nkeys, 5u);
  const Value *k = rq.exec.keys;
  EXPECT_FALSE(k[0].is_null());
  EXPECT_NE(k[0].ptr, nullptr);
  EXPECT_EQ(k[0].len, 0u);
  EXPECT_TRUE(k[1].is_null());
  EXPECT_EQ(k[1].len, 0u);
  EXPECT_EQ(k[1].view(), std::string_view());
  EXPECT_FALSE(k[2].is_null());
  EXPECT_EQ(k[2].view(), "\0\0"s);
  EXPECT_FALSE(k[3].is_null());
  EXPECT_EQ(k[3].view(), "\0"s);
  EXPECT_EQ(k[4].view(), "x\0"s);
}

TEST(HsParser, CommandIsReportedOnErrorsSoTheDispatcherCanAnswerUnauthFirst) {
  struct {
    std::string input;
    Command command;
  } cases[] = {
      {"P\tx\n", Command::open_index},
      {"P\t1\n", Command::open_index},
      {"1\t==\t1\tk\n", Command::exec},
      {"1\t=\t0\n", Command::exec},
  };
  for (auto &c : cases) {
    SCOPED_TRACE(quote(c.input));
    Parse_scratch scratch;
    Request rq;
    rq.command = c.command == Command::exec ? Command::auth : Command::exec;
    const Parse_result r = parse_request(c.input.data(), c.input.size(), Limits(), scratch, &rq);
    EXPECT_EQ(r.status, Parse_status::error);
    EXPECT_EQ(rq.command, c.command);
  }
}

TEST(HsParser, ExecFieldsAreResetBetweenRequests) {
  std::string buf = "1\t=\t1\tk\t7\t3\t@\t0\t1\tv\tF\t=\t0\tx\tD?\n2\t<\t1\tz\n";
  Parse_scratch scratch;
  Request rq;
  Parse_result r = parse_request(buf.data(), buf.size(), Limits(), scratch, &rq);
  ASSERT_EQ(r.status, Parse_status::complete);
  r = parse_request(buf.data() + r.consumed, buf.size() - r.consumed, Limits(), scratch, &rq);
  ASSERT_EQ(r.status, Parse_status::complete);
  EXPECT_EQ(describe(rq), R"(exec id=2 op=lt keys=["z"])");
  EXPECT_FALSE(rq.exec.has_limit);
  EXPECT_EQ(rq.exec.limit, 1u);
  EXPECT_EQ(rq.exec.offset, 0u);
  EXPECT_FALSE(rq.exec.has_in);
  EXPECT_EQ(rq.exec.nfilters, 0u);
  EXPECT_EQ(rq.exec.mod, Modify_op::none);
  EXPECT_FALSE(rq.exec.mod_returns_rows);
}

/* ---- escaping ----------------------------------------------------------------------------------- */

TEST(HsEscape, EveryByteValueRoundTripsThroughEscapeAndUnescape) {
  for (int b = 0; b < 256; ++b) {
    SCOPED_TRACE(b);
    const char c = static_cast<char>(b);
    Byte_buffer out;
    escape_into(out, &c, 1);
    const std::string expected =
        b < 0x10 ? std::string{'\x01', static_cast<char>(b + 0x40)} : std::string(1, c);
    EXPECT_EQ(std::string(out.view()), expected);
    std::string s(out.view());
    s.resize(unescape_in_place(s.data(), s.size()));
    EXPECT_EQ(s, std::string(1, c));
  }
}

TEST(HsEscape, AllByteValuesInOneValueRoundTripThroughAParsedRequest) {
  std::string all;
  for (int rep = 0; rep < 3; ++rep)
    for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  Byte_buffer line;
  line.append("1\t+\t2", 5);
  append_value(line, all.data(), all.size());
  append_value(line, all.data() + 1, 17);
  line.push_back('\n');
  /* Only TAB separators and the final LF may appear unescaped below 0x10, and only 0x01 escapes. */
  size_t tabs = 0;
  for (size_t i = 0; i + 1 < line.size(); ++i) {
    const unsigned char ch = static_cast<unsigned char>(line.data()[i]);
    if (ch == '\t') ++tabs;
    else EXPECT_TRUE(ch >= 0x10 || ch == 0x01) << "byte " << i;
  }
  EXPECT_EQ(tabs, 4u);
  Parse_scratch scratch;
  Request rq;
  const Parse_result r = parse_request(line.data(), line.size(), Limits(), scratch, &rq);
  ASSERT_EQ(r.status, Parse_status::complete);
  ASSERT_EQ(rq.exec.nkeys, 2u);
  EXPECT_EQ(rq.exec.keys[0].view(), all);
  EXPECT_EQ(rq.exec.keys[1].view(), all.substr(1, 17));
}

/* A simple byte-at-a-time reference, to check the vectorised escape at every block position. */
std::string reference_escape(std::string_view s) {
  std::string r;
  for (unsigned char c : s) {
    if (c < 0x10) {
      r += '\x01';
      r += static_cast<char>(c + 0x40);
    } else {
      r += static_cast<char>(c);
    }
  }
  return r;
}

TEST(HsEscape, MatchesAByteAtATimeReferenceAtEveryPositionAndLength) {
  for (size_t len = 0; len <= 70; ++len) {
    for (size_t pos = 0; pos <= len; ++pos) {
      std::string s(len, 'a');
      if (pos < len) s[pos] = '\n';
      if (len > 3) s[len - 1] = '\0';
      SCOPED_TRACE(quote(s));
      Byte_buffer out;
      out.append("pre", 3);
      escape_into(out, s.data(), s.size());
      EXPECT_EQ(std::string(out.view()), "pre" + reference_escape(s));
      std::string u(out.view().substr(3));
      u.resize(unescape_in_place(u.data(), u.size()));
      EXPECT_EQ(u, s);
    }
  }
}

TEST(HsEscape, UnescapeHandlesConsecutiveAndTrailingEscapes) {
  struct {
    std::string in, out;
  } cases[] = {
      {"", ""},
      {"plain", "plain"},
      {"\x01\x40\x01\x41\x01\x4f"s, "\x00\x01\x0f"s},
      {"x\x01\x7ey"s, "x\x3ey"s},  // any byte from 0x40 on, as HandlerSocket reads it
      {"\x01\xff"s, "\xbf"s},
  };
  for (auto &c : cases) {
    SCOPED_TRACE(quote(c.in));
    std::string s = c.in;
    s.resize(unescape_in_place(s.data(), s.size()));
    EXPECT_EQ(s, c.out);
  }
  /* Malformed: a 0x01 at the end, or before a byte below 0x40. */
  for (std::string bad : {"a\x01"s, "\x01"s, "\x01\x40\x01"s, "\x01\x01\x41"s, "ab\x01 cd"s, "\x01\x3f"s}) {
    SCOPED_TRACE(quote(bad));
    EXPECT_EQ(unescape_in_place(bad.data(), bad.size()), kBadEscape);
  }
}

/* ---- limits ------------------------------------------------------------------------------------- */

struct Limit_case {
  const char *what;
  std::string input;
  size_t max_line;
  uint32_t max_tokens;
  Parse_status status;
  const char *message;  // nullptr for complete / need_more
};

TEST(HsParser, LinesAndTokenCountsBeyondTheLimitsAreFatal) {
  const Limit_case cases[] = {
      {"a line of exactly max_line bytes", "1\t=\t1\tabcd\n", 10, 100, Parse_status::complete, nullptr},
      {"a CR does not count towards max_line", "1\t=\t1\tabcd\r\n", 10, 100, Parse_status::complete,
       nullptr},
      {"a line one byte over max_line", "1\t=\t1\tabcde\n", 10, 100, Parse_status::fatal, "toolong"},
      {"a line one byte over max_line with CRLF", "1\t=\t1\tabcde\r\n", 10, 100, Parse_status::fatal,
       "toolong"},
      {"max_line bytes without an LF may still complete", "1\t=\t1\tabcd", 10, 100,
       Parse_status::need_more, nullptr},
      {"max_line bytes and a CR may still complete", "1\t=\t1\tabcd\r", 10, 100,
       Parse_status::need_more, nullptr},
      {"max_line+1 bytes without an LF can never fit", "1\t=\t1\tabcde", 10, 100, Parse_status::fatal,
       "toolong"},
      {"max_line bytes and two CRs can never fit", "1\t=\t1\tabcd\r\r", 10, 100, Parse_status::fatal,
       "toolong"},
      {"an LF far beyond max_line", std::string(5000, 'x') + "\n", 10, 100, Parse_status::fatal,
       "toolong"},
      {"an oversized empty-ish line", std::string(11, '\t') + "\n", 10, 100, Parse_status::fatal,
       "toolong"},
      {"max_line zero accepts only empty lines", "\n", 0, 100, Parse_status::error, "cmd"},
      {"max_line zero rejects one byte", "1", 0, 100, Parse_status::fatal, "toolong"},
      {"exactly max_tokens tokens", "1\t=\t1\ta\n", 100, 4, Parse_status::complete, nullptr},
      {"one token over max_tokens", "1\t=\t2\ta\tb\n", 100, 4, Parse_status::fatal, "toomanytokens"},
      {"many empty tokens over max_tokens", "1" + std::string(200, '\t') + "\n", 1000, 100,
       Parse_status::fatal, "toomanytokens"},
      {"an empty line is one token", "\n", 100, 1, Parse_status::error, "cmd"},
  };
  for (const Limit_case &c : cases) {
    SCOPED_TRACE(c.what);
    std::string buf = c.input;
    Limits limits;
    limits.max_line = c.max_line;
    limits.max_tokens = c.max_tokens;
    Parse_scratch scratch;
    Request rq;
    const Parse_result r = parse_request(buf.data(), buf.size(), limits, scratch, &rq);
    EXPECT_EQ(status_name(r.status), std::string(status_name(c.status)));
    if (c.message) {
      ASSERT_NE(r.error_message, nullptr);
      EXPECT_STREQ(r.error_message, c.message);
    }
    EXPECT_LE(scratch.values.size(), c.max_tokens);
  }
}

TEST(HsParser, AnOverlongLineAfterAGoodOneIsFatalOnlyWhenReached) {
  std::string buf = "1\t=\t1\ta\n" + std::string(100, 'y');
  Limits limits;
  limits.max_line = 50;
  EXPECT_EQ(render(run_connection(buf, limits)),
            "complete exec id=1 op=eq keys=[\"a\"]\n"
            "fatal toolong\n");
}

TEST(HsParser, HugeClaimedCountsAreRejectedWithoutAllocatingForThem) {
  const struct {
    std::string input;
    const char *message;
  } cases[] = {
      {"1\t=\t4294967295\tk\n", "klen"},
      {"1\t=\t4294967294\tk\t1\t0\n", "klen"},
      {"1\t=\t1\tk\t1\t0\t@\t0\t99999999\tv\n", "invalueslen"},
      {"1\t=\t1\tk\t1\t0\t@\t0\t4294967295\tv\tw\n", "invalueslen"},
      {"1\t=\t1\tk\t4294967295\t4294967295\tF\t=\t4294967295\tv\n", nullptr},
      {"4294967295\t=\t1\tk\t1\t0\t@\t4294967295\t1\tv\n", nullptr},
  };
  for (auto &c : cases) {
    SCOPED_TRACE(quote(c.input));
    std::string buf = c.input;
    Parse_scratch scratch;
    Request rq;
    const Parse_result r = parse_request(buf.data(), buf.size(), Limits(), scratch, &rq);
    if (c.message) {
      EXPECT_EQ(r.status, Parse_status::error);
      EXPECT_STREQ(r.error_message, c.message);
    } else {
      EXPECT_EQ(r.status, Parse_status::complete);
    }
    /* Storage follows the tokens on the line (a dozen), never the number the client claimed. */
    EXPECT_LE(scratch.values.capacity(), 64u);
    EXPECT_LE(scratch.filters.capacity(), 64u);
  }
}

TEST(HsParser, ScratchStorageIsReusedWithoutReallocatingOnceGrown) {
  const std::string request = "1\t=\t3\ta\tb\tc\t10\t0\t@\t0\t2\tx\ty\tF\t=\t0\tv\tW\t<\t1\tw\tU\tm\n";
  Parse_scratch scratch;
  Request rq;
  std::string buf = request;
  ASSERT_EQ(parse_request(buf.data(), buf.size(), Limits(), scratch, &rq).status,
            Parse_status::complete);
  const Value *values = scratch.values.data();
  const Filter *filters = scratch.filters.data();
  for (int i = 0; i < 1000; ++i) {
    buf = request;
    ASSERT_EQ(parse_request(buf.data(), buf.size(), Limits(), scratch, &rq).status,
              Parse_status::complete);
    ASSERT_EQ(scratch.values.data(), values);
    ASSERT_EQ(scratch.filters.data(), filters);
  }
  EXPECT_EQ(rq.exec.nfilters, 2u);
}

TEST(HsParser, ManyTokensWithinTheLimitAllParse) {
  /* 5000 insert values: grows the scratch storage past its first sizes. */
  std::string buf = "1\t+\t5000";
  for (int i = 0; i < 5000; ++i) buf += "\tv" + std::to_string(i);
  buf += "\n";
  Parse_scratch scratch;
  Request rq;
  const Parse_result r = parse_request(buf.data(), buf.size(), Limits(), scratch, &rq);
  ASSERT_EQ(r.status, Parse_status::complete);
  ASSERT_EQ(rq.exec.nkeys, 5000u);
  EXPECT_EQ(rq.exec.keys[0].view(), "v0");
  EXPECT_EQ(rq.exec.keys[4999].view(), "v4999");
  EXPECT_LE(scratch.values.size(), Limits().max_tokens);
}

TEST(HsParser, AnEmptyBufferNeedsMore) {
  Parse_scratch scratch;
  Request rq;
  EXPECT_EQ(parse_request(nullptr, 0, Limits(), scratch, &rq).status, Parse_status::need_more);
  char c = 'x';
  EXPECT_EQ(parse_request(&c, 0, Limits(), scratch, &rq).status, Parse_status::need_more);
}

}  // namespace
}  // namespace hs
}  // namespace tablesocket
