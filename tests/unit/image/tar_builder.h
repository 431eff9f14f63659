#pragma once
// Builds tar streams for the unpacker's tests: ustar headers, a pax header for paths longer
// than the ustar field, and whatever a hostile layer might hold.

#include <cstdio>
#include <cstring>
#include <string>

namespace tessera::worker::image::testing {

class TarBuilder {
 public:
  TarBuilder& File(const std::string& path, const std::string& data, unsigned mode = 0644,
                   long mtime = 1700000000) {
    return Entry(path, '0', data, "", mode, mtime);
  }
  TarBuilder& Dir(const std::string& path, unsigned mode = 0755) {
    return Entry(path, '5', "", "", mode, 0);
  }
  TarBuilder& Symlink(const std::string& path, const std::string& target) {
    return Entry(path, '2', "", target, 0777, 0);
  }
  TarBuilder& HardLink(const std::string& path, const std::string& target) {
    return Entry(path, '1', "", target, 0644, 0);
  }
  TarBuilder& Fifo(const std::string& path) { return Entry(path, '6', "", "", 0644, 0); }
  // Any entry; a path or link too long for ustar goes into a pax header before it.
  TarBuilder& Entry(const std::string& path, char type, const std::string& data,
                    const std::string& link, unsigned mode, long mtime) {
    std::string name = path;
    if (path.size() > 99 || link.size() > 99) {
      std::string records;
      if (path.size() > 99) records += PaxRecord("path", path);
      if (link.size() > 99) records += PaxRecord("linkpath", link);
      Header("PaxHeaders/x", 'x', records.size(), "", 0644, 0);
      Data(records);
      name = path.substr(0, 99);
    }
    Header(name, type, data.size(), link.substr(0, 99), mode, mtime);
    Data(data);
    return *this;
  }
  // The stream with the two zero blocks that end it.
  std::string Finish() const { return out_ + std::string(1024, '\0'); }
  const std::string& bytes() const { return out_; }

 private:
  static std::string PaxRecord(const std::string& key, const std::string& value) {
    const std::string body = " " + key + "=" + value + "\n";
    size_t length = body.size() + 1;
    while (std::to_string(length).size() + body.size() != length) ++length;
    return std::to_string(length) + body;
  }
  void Header(const std::string& name, char type, size_t size, const std::string& link,
              unsigned mode, long mtime) {
    char h[512] = {};
    std::memcpy(h, name.data(), name.size());
    std::snprintf(h + 100, 8, "%07o", mode);
    std::snprintf(h + 108, 8, "%07o", 0);
    std::snprintf(h + 116, 8, "%07o", 0);
    std::snprintf(h + 124, 12, "%011lo", static_cast<unsigned long>(size));
    std::snprintf(h + 136, 12, "%011lo", static_cast<unsigned long>(mtime));
    h[156] = type;
    std::memcpy(h + 157, link.data(), link.size());
    std::memcpy(h + 257, "ustar", 6);
    std::memcpy(h + 263, "00", 2);
    std::memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (unsigned char c : h) sum += c;
    std::snprintf(h + 148, 8, "%06o", sum);
    out_.append(h, 512);
  }
  void Data(const std::string& data) {
    out_ += data;
    out_.append((512 - data.size() % 512) % 512, '\0');
  }
  std::string out_;
};

}  // namespace tessera::worker::image::testing
