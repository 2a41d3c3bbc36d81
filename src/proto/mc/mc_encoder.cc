/* memcached reply encoder: appends memcached's exact reply bytes to a Byte_buffer. */
#include "proto/mc/mc_protocol.h"

#include <cstring>

namespace tablesocket {
namespace mc {

namespace {

constexpr std::string_view kCrlf("\r\n", 2);

void append_int(Byte_buffer &out, int64_t v) {
  if (v < 0) {
    out.push_back('-');
    out.append_uint(static_cast<uint64_t>(0) - static_cast<uint64_t>(v));
  } else {
    out.append_uint(static_cast<uint64_t>(v));
  }
}

/* " k<key>" or " k<base64 key> b" */
void append_key_flag(Byte_buffer &out, std::string_view key, bool binary) {
  out.append(" k", 2);
  if (binary) {
    append_base64(out, key.data(), key.size());
    out.append(" b", 2);
  } else {
    out.append(key);
  }
}

/* " <flag><arg>", the opaque token echoed as sent */
void append_opaque(Byte_buffer &out, const Mc_meta_flag &f) {
  out.push_back(' ');
  out.push_back(f.flag);
  out.append(f.arg);
}

void append_flag_uint(Byte_buffer &out, char flag, uint64_t v) {
  out.push_back(' ');
  out.push_back(flag);
  out.append_uint(v);
}

void append_flag_int(Byte_buffer &out, char flag, int64_t v) {
  out.push_back(' ');
  out.push_back(flag);
  append_int(out, v);
}

}  // namespace

void encode_line(Byte_buffer &out, std::string_view line) {
  char *p = out.prepare(line.size() + 2);
  std::memcpy(p, line.data(), line.size());
  p[line.size()] = '\r';
  p[line.size() + 1] = '\n';
  out.wrote(line.size() + 2);
}

void encode_reply(Byte_buffer &out, Mc_reply r) {
  switch (r) {
    case Mc_reply::stored: out.append("STORED\r\n"); return;
    case Mc_reply::not_stored: out.append("NOT_STORED\r\n"); return;
    case Mc_reply::exists: out.append("EXISTS\r\n"); return;
    case Mc_reply::not_found: out.append("NOT_FOUND\r\n"); return;
    case Mc_reply::deleted: out.append("DELETED\r\n"); return;
    case Mc_reply::touched: out.append("TOUCHED\r\n"); return;
    case Mc_reply::ok: out.append("OK\r\n"); return;
    case Mc_reply::end: out.append("END\r\n"); return;
    case Mc_reply::error: out.append("ERROR\r\n"); return;
    case Mc_reply::reset: out.append("RESET\r\n"); return;
  }
}

void encode_client_error(Byte_buffer &out, std::string_view msg) {
  out.append("CLIENT_ERROR ");
  encode_line(out, msg);
}

void encode_server_error(Byte_buffer &out, std::string_view msg) {
  out.append("SERVER_ERROR ");
  encode_line(out, msg);
}

void encode_value_header(Byte_buffer &out, std::string_view key, uint32_t flags, size_t bytes,
                         bool with_cas, uint64_t cas) {
  out.append("VALUE ");
  out.append(key);
  out.push_back(' ');
  out.append_uint(flags);
  out.push_back(' ');
  out.append_uint(bytes);
  if (with_cas) {
    out.push_back(' ');
    out.append_uint(cas);
  }
  out.append(kCrlf);
}

void encode_value(Byte_buffer &out, std::string_view key, uint32_t flags, std::string_view data,
                  bool with_cas, uint64_t cas) {
  encode_value_header(out, key, flags, data.size(), with_cas, cas);
  encode_line(out, data);
}

void encode_number(Byte_buffer &out, uint64_t v) {
  out.append_uint(v);
  out.append(kCrlf);
}

void encode_stat(Byte_buffer &out, std::string_view name, std::string_view value) {
  out.append("STAT ");
  out.append(name);
  out.push_back(' ');
  encode_line(out, value);
}

void encode_stat(Byte_buffer &out, std::string_view name, uint64_t value) {
  out.append("STAT ");
  out.append(name);
  out.push_back(' ');
  encode_number(out, value);
}

void encode_version(Byte_buffer &out, std::string_view version) {
  out.append("VERSION ");
  encode_line(out, version);
}

/* ---- meta ---- */

void encode_meta_code(Byte_buffer &out, Mc_meta_code code) {
  static const char codes[][3] = {"HD", "EN", "NS", "EX", "NF", "MN"};
  out.append(codes[static_cast<int>(code)], 2);
}

void end_meta_line(Byte_buffer &out) { out.append(kCrlf); }

void encode_meta_value_header(Byte_buffer &out, size_t bytes) {
  out.append("VA ", 3);
  out.append_uint(bytes);
}

void append_meta_flags(Byte_buffer &out, const Mc_request &rq, const Mc_item_info *item) {
  const bool request_binary = rq.meta.base64_key;
  const std::string_view key = rq.key();
  for (uint32_t i = 0; i < rq.nmeta_flags; ++i) {
    const Mc_meta_flag &f = rq.meta_flags[i];
    /* Flags every meta command with a key echoes, hit or miss. */
    if (f.flag == 'O') {
      if (rq.command == Mc_command::mg || rq.command == Mc_command::ms ||
          rq.command == Mc_command::md || rq.command == Mc_command::ma)
        append_opaque(out, f);
      continue;
    }
    if (f.flag == 'k') {
      if (rq.command == Mc_command::mg && item)
        append_key_flag(out, key, item->key_binary);
      else if (rq.command == Mc_command::mg || rq.command == Mc_command::ms ||
               rq.command == Mc_command::md || rq.command == Mc_command::ma)
        append_key_flag(out, key, request_binary);
      continue;
    }
    switch (rq.command) {
      case Mc_command::mg:
        if (!item) break;
        switch (f.flag) {
          case 's': append_flag_uint(out, 's', item->size); break;
          case 't': append_flag_int(out, 't', item->ttl); break;
          case 'c': append_flag_uint(out, 'c', item->cas); break;
          case 'f': append_flag_uint(out, 'f', item->client_flags); break;
          case 'l': append_flag_uint(out, 'l', item->last_access); break;
          case 'h': out.append(item->fetched ? " h1" : " h0", 3); break;
          default: break;
        }
        break;
      case Mc_command::ms:
        if (f.flag == 'c') append_flag_uint(out, 'c', item ? item->cas : 0);
        break;
      case Mc_command::ma:
        if (!item) break;
        if (f.flag == 'c') append_flag_uint(out, 'c', item->cas);
        if (f.flag == 't') append_flag_int(out, 't', item->ttl);
        break;
      default:
        break;
    }
  }
  if (rq.command == Mc_command::mg && item) {
    if (item->token_sent) out.append(" Z", 2);
    if (item->stale) out.append(" X", 2);
    if (item->won) out.append(" W", 2);
  }
}

void encode_meta(Byte_buffer &out, Mc_meta_code code, const Mc_request &rq,
                 const Mc_item_info *item) {
  encode_meta_code(out, code);
  append_meta_flags(out, rq, item);
  end_meta_line(out);
}

void encode_meta_value(Byte_buffer &out, const Mc_request &rq, const Mc_item_info *item,
                       std::string_view data) {
  encode_meta_value_header(out, data.size());
  append_meta_flags(out, rq, item);
  end_meta_line(out);
  encode_line(out, data);
}

void encode_meta_debug(Byte_buffer &out, std::string_view key, bool key_binary,
                       const Mc_debug_info &info) {
  out.append("ME ", 3);
  if (key_binary)
    append_base64(out, key.data(), key.size());
  else
    out.append(key);
  out.append(" exp=");
  append_int(out, info.exp);
  out.append(" la=");
  out.append_uint(info.last_access);
  out.append(" cas=");
  out.append_uint(info.cas);
  out.append(info.fetched ? " fetch=yes" : " fetch=no");
  out.append(" cls=");
  out.append_uint(info.slab_class);
  out.append(" size=");
  out.append_uint(info.total_size);
  out.append(kCrlf);
}

}  // namespace mc
}  // namespace tablesocket
