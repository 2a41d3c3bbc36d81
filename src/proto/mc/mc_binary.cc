/* memcached's binary protocol: see mc_binary.h. */
#include "proto/mc/mc_binary.h"

#include <cstring>

namespace tablesocket {
namespace mc {

namespace {

uint16_t be16(const char *p) {
  const auto *u = reinterpret_cast<const unsigned char *>(p);
  return uint16_t(u[0] << 8 | u[1]);
}
uint32_t be32(const char *p) {
  const auto *u = reinterpret_cast<const unsigned char *>(p);
  return uint32_t(u[0]) << 24 | uint32_t(u[1]) << 16 | uint32_t(u[2]) << 8 | uint32_t(u[3]);
}
uint64_t be64(const char *p) { return uint64_t(be32(p)) << 32 | be32(p + 4); }

/* The plain opcode of a quiet one (and whether it was quiet); false for an opcode memcached does
   not serve. */
bool map_opcode(uint8_t opcode, Bin_op *op, bool *quiet) {
  *quiet = true;
  switch (static_cast<Bin_op>(opcode)) {
    case Bin_op::getq: *op = Bin_op::get; return true;
    case Bin_op::getkq: *op = Bin_op::getk; return true;
    case Bin_op::setq: *op = Bin_op::set; return true;
    case Bin_op::addq: *op = Bin_op::add; return true;
    case Bin_op::replaceq: *op = Bin_op::replace; return true;
    case Bin_op::delq: *op = Bin_op::del; return true;
    case Bin_op::incrq: *op = Bin_op::incr; return true;
    case Bin_op::decrq: *op = Bin_op::decr; return true;
    case Bin_op::quitq: *op = Bin_op::quit; return true;
    case Bin_op::flushq: *op = Bin_op::flush; return true;
    case Bin_op::appendq: *op = Bin_op::append; return true;
    case Bin_op::prependq: *op = Bin_op::prepend; return true;
    case Bin_op::gatq: *op = Bin_op::gat; return true;
    case Bin_op::gatkq: *op = Bin_op::gatk; return true;
    case Bin_op::get: case Bin_op::set: case Bin_op::add: case Bin_op::replace: case Bin_op::del:
    case Bin_op::incr: case Bin_op::decr: case Bin_op::quit: case Bin_op::flush: case Bin_op::noop:
    case Bin_op::version: case Bin_op::getk: case Bin_op::append: case Bin_op::prepend:
    case Bin_op::stat: case Bin_op::touch: case Bin_op::gat: case Bin_op::sasl_list_mechs:
    case Bin_op::sasl_auth: case Bin_op::sasl_step: case Bin_op::gatk:
      *op = static_cast<Bin_op>(opcode);
      *quiet = false;
      return true;
  }
  return false;
}

/* Whether the lengths fit the opcode, as memcached's dispatch_bin_command checks them. */
bool shape_ok(Bin_op op, uint32_t ext, uint32_t key, uint32_t body) {
  switch (op) {
    case Bin_op::version:
    case Bin_op::noop:
    case Bin_op::quit:
    case Bin_op::sasl_list_mechs: return ext == 0 && key == 0 && body == 0;
    case Bin_op::flush: return key == 0 && body == ext && (ext == 0 || ext == 4);
    case Bin_op::set:
    case Bin_op::add:
    case Bin_op::replace: return ext == 8 && key != 0 && body >= key + 8;
    case Bin_op::get:
    case Bin_op::getk:
    case Bin_op::del: return ext == 0 && key != 0 && body == key;
    case Bin_op::incr:
    case Bin_op::decr: return ext == 20 && key != 0 && body == key + 20;
    case Bin_op::append:
    case Bin_op::prepend: return ext == 0 && key != 0;
    case Bin_op::stat: return ext == 0 && body == key;
    case Bin_op::sasl_auth:
    case Bin_op::sasl_step: return ext == 0 && key != 0;
    case Bin_op::touch:
    case Bin_op::gat:
    case Bin_op::gatk: return ext == 4 && key != 0 && body == key + 4;
    default: return false;
  }
}

Bin_parse_result fatal(Bin_status st, bool reply = true) {
  Bin_parse_result r;
  r.status = Mc_parse_status::fatal;
  r.error = st;
  r.reply = reply;
  return r;
}

}  // namespace

const char *bin_status_text(Bin_status st) {
  switch (st) {
    case Bin_status::ok: return "";
    case Bin_status::key_enoent: return "Not found";
    case Bin_status::key_eexists: return "Data exists for key.";
    case Bin_status::e2big: return "Too large.";
    case Bin_status::einval: return "Invalid arguments";
    case Bin_status::not_stored: return "Not stored.";
    case Bin_status::delta_badval: return "Non-numeric server-side value for incr or decr";
    case Bin_status::auth_error: return "Auth failure.";
    case Bin_status::auth_continue: return "";
    case Bin_status::unknown_command: return "Unknown command";
    case Bin_status::enomem: return "Out of memory";
    case Bin_status::not_supported: return "Not supported";
    case Bin_status::internal_error: return "Internal error";
    case Bin_status::ebusy: return "Busy";
    case Bin_status::etmpfail: return "Temporary failure";
  }
  return "Unknown error";
}

Bin_parse_result parse_binary_request(const char *buf, size_t len, const Mc_limits &limits, Bin_request *out) {
  if (len < kBinaryHeaderLength) return {};
  if (static_cast<unsigned char>(buf[0]) != kBinaryRequestMagic) return fatal(Bin_status::einval, false);
  out->opcode = static_cast<uint8_t>(buf[1]);
  std::memcpy(out->opaque, buf + 12, 4);
  const uint32_t key = be16(buf + 2), ext = static_cast<unsigned char>(buf[4]), body = be32(buf + 8);
  out->cas = be64(buf + 16);
  out->key = {};
  out->value = {};
  out->flags = out->exptime = 0;
  out->has_exptime = false;
  out->delta = out->initial = 0;
  out->quiet = false;
  if (uint64_t(key) + ext > body) return fatal(Bin_status::unknown_command);
  if (key > kMaxKeyLength) return fatal(Bin_status::einval);
  if (!map_opcode(out->opcode, &out->op, &out->quiet)) {
    /* An opcode memcached does not serve: answered, and its body discarded as it arrives. */
    Bin_parse_result r;
    r.status = Mc_parse_status::error;
    r.error = Bin_status::unknown_command;
    r.consumed = kBinaryHeaderLength;
    r.swallow = body;
    return r;
  }
  if (!shape_ok(out->op, ext, key, body)) return fatal(Bin_status::einval);
  const uint64_t vlen = uint64_t(body) - key - ext;
  const bool sasl = out->op == Bin_op::sasl_auth || out->op == Bin_op::sasl_step;
  if (vlen > (sasl ? kMaxSaslBody : limits.max_value_size)) {
    /* Refused before the value is read: the key (for a set, memcached then drops the old item)
       needs the extras and key only. */
    if (len < kBinaryHeaderLength + ext + key) return {};
    out->key = std::string_view(buf + kBinaryHeaderLength + ext, key);
    Bin_parse_result r;
    r.status = Mc_parse_status::error;
    r.error = sasl ? Bin_status::einval : Bin_status::e2big;
    r.consumed = kBinaryHeaderLength + ext + key;
    r.swallow = vlen;
    return r;
  }
  if (len < kBinaryHeaderLength + uint64_t(body)) return {};
  const char *e = buf + kBinaryHeaderLength;
  out->key = std::string_view(e + ext, key);
  out->value = std::string_view(e + ext + key, size_t(vlen));
  switch (out->op) {
    case Bin_op::set:
    case Bin_op::add:
    case Bin_op::replace:
      out->flags = be32(e);
      out->exptime = be32(e + 4);
      break;
    case Bin_op::incr:
    case Bin_op::decr:
      out->delta = be64(e);
      out->initial = be64(e + 8);
      out->exptime = be32(e + 16);
      break;
    case Bin_op::touch:
    case Bin_op::gat:
    case Bin_op::gatk:
      out->exptime = be32(e);
      break;
    case Bin_op::flush:
      if (ext == 4) {
        out->exptime = be32(e);
        out->has_exptime = true;
      }
      break;
    default: break;
  }
  Bin_parse_result r;
  r.status = Mc_parse_status::complete;
  r.consumed = kBinaryHeaderLength + size_t(body);
  return r;
}

void encode_bin_response(Byte_buffer &out, const Bin_request &rq, Bin_status st, uint64_t cas,
                         std::string_view extras, std::string_view key, std::string_view value) {
  char h[kBinaryHeaderLength] = {};
  h[0] = char(kBinaryResponseMagic);
  h[1] = char(rq.opcode);
  h[2] = char(key.size() >> 8);
  h[3] = char(key.size());
  h[4] = char(extras.size());
  /* data type 0 (raw bytes) */
  h[6] = char(uint16_t(st) >> 8);
  h[7] = char(uint16_t(st));
  put_be32(h + 8, uint32_t(extras.size() + key.size() + value.size()));
  std::memcpy(h + 12, rq.opaque, 4);
  put_be64(h + 16, cas);
  out.append(h, sizeof h);
  for (std::string_view part : {extras, key, value})
    if (!part.empty()) out.append(part);  // an empty view may have no data pointer
}

void encode_bin_error(Byte_buffer &out, const Bin_request &rq, Bin_status st, std::string_view message) {
  encode_bin_response(out, rq, st, 0, {}, {}, message.empty() ? std::string_view(bin_status_text(st)) : message);
}

}  // namespace mc
}  // namespace tablesocket
