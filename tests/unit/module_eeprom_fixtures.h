// Module EEPROM fixtures shared by the decoder's tests (module_eeprom_test.cc) and the link
// collector's (link_collector_test.cc): a fake module's memory, and three modules written
// byte by byte as their specs lay them out, each value worked by hand in the comments (the
// decoder's tests check every field against them).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "sys/module_eeprom.h"

namespace rdmascope::testing {

using sys::ModulePageKey;
using sys::ModulePageReader;

// A module's memory: 256 bytes per (I2C address, page, bank), and every read asked of it.
class FakeModule {
 public:
  struct Read {
    ModulePageKey key;
    int offset, length;
  };
  std::array<uint8_t, 256>& Page(uint8_t i2c, uint8_t page = 0, uint8_t bank = 0) {
    return pages_[{i2c, page, bank}];
  }
  void Put(uint8_t i2c, uint8_t page, size_t offset, std::vector<uint8_t> bytes, uint8_t bank = 0) {
    std::copy(bytes.begin(), bytes.end(), Page(i2c, page, bank).begin() + offset);
  }
  void Text(uint8_t i2c, uint8_t page, size_t offset, size_t width, const std::string& text) {
    std::string padded = text;
    padded.resize(width, ' ');
    std::memcpy(Page(i2c, page).data() + offset, padded.data(), width);
  }
  void Drop(uint8_t i2c, uint8_t page, uint8_t bank = 0) { pages_.erase({i2c, page, bank}); }
  ModulePageReader Reader() {
    return [this](const ModulePageKey& key, uint8_t offset, uint8_t length, uint8_t* out) {
      reads.push_back({key, offset, length});
      // The lower half is the same page whatever the page asked.
      const ModulePageKey where = offset < 128 ? ModulePageKey{key.i2c_address, 0, 0} : key;
      const auto it = pages_.find(where);
      if (it == pages_.end()) return false;
      std::memcpy(out, it->second.data() + offset, length);
      return true;
    };
  }
  // Whether any read touched [first, last] of that page.
  bool Touched(uint8_t i2c, uint8_t page, int first, int last) const {
    for (const Read& read : reads) {
      const bool same_page =
          read.key.i2c_address == i2c && (read.offset < 128 ? page == 0 : read.key.page == page);
      if (same_page && read.offset <= last && read.offset + read.length - 1 >= first) return true;
    }
    return false;
  }
  std::vector<Read> reads;

 private:
  std::map<ModulePageKey, std::array<uint8_t, 256>> pages_;
};

// An SFP+ SR optic, internally calibrated (A0h byte 92 = 0x68: diagnostics 0x40, internal
// 0x20, average RX power 0x08).
inline FakeModule InternallyCalibratedSfp() {
  FakeModule m;
  m.Put(0x50, 0, 0, {0x03});   // SFP
  m.Put(0x50, 0, 12, {0x67});  // nominal rate 103 x 100 MBd = 10.3 GBd: 10GBASE-R, 10 Gb/s
  m.Text(0x50, 0, 20, 16, "ACME OPTICS");
  m.Put(0x50, 0, 37, {0x00, 0x90, 0x65});
  m.Text(0x50, 0, 40, 16, "SFP-10G-SR");
  m.Text(0x50, 0, 56, 4, "A");
  m.Put(0x50, 0, 60, {0x03, 0x52});  // 850 nm
  m.Text(0x50, 0, 68, 16, "SN12345");
  m.Text(0x50, 0, 84, 8, "261206");
  m.Put(0x50, 0, 92, {0x68, 0x00, 0x08});
  // A2h thresholds: temperature 75 / -5 / 70 / 0 C; supply all zero (invalid); RX power
  // 20000, 100, 10000, 200 x 0.1 uW = 2 mW, 10 uW, 1 mW, 20 uW.
  m.Put(0x51, 0, 0, {0x4B, 0x00, 0xFB, 0x00, 0x46, 0x00, 0x00, 0x00});
  m.Put(0x51, 0, 32, {0x4E, 0x20, 0x00, 0x64, 0x27, 0x10, 0x00, 0xC8});
  // Monitors: 0x1980 = 25 + 128/256 = 25.5 C; 0x80E8 = 33000 x 100 uV = 3.3 V; 0x1770 = 6000 x
  // 2 uA = 12 mA; 0x2710 = 10000 x 0.1 uW = 1 mW; 0x0FA0 = 4000 x 0.1 uW = 0.4 mW.
  m.Put(0x51, 0, 96, {0x19, 0x80, 0x80, 0xE8, 0x17, 0x70, 0x27, 0x10, 0x0F, 0xA0});
  m.Put(0x51, 0, 112, {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF});  // flags: never read
  return m;
}

// A QSFP28 SR4 (identifier 0x11), paged memory.
inline FakeModule Qsfp28() {
  FakeModule m;
  m.Put(0x50, 0, 0, {0x11, 0x08, 0x00});
  m.Put(0x50, 0, 3, std::vector<uint8_t>(19, 0xFF));  // latched flags: never read
  m.Put(0x50, 0, 22, {0x22, 0x00});                   // 34.0 C
  m.Put(0x50, 0, 26, {0x80, 0x84});                   // 32900 -> 3.29 V
  // RX power lanes 1-4: 5000, 4000, 3000, 0 x 0.1 uW; bias 7500 x 2 uA = 15 mA; TX 1 mW.
  m.Put(0x50, 0, 34, {0x13, 0x88, 0x0F, 0xA0, 0x0B, 0xB8, 0x00, 0x00});
  m.Put(0x50, 0, 42, {0x1D, 0x4C, 0x1D, 0x4C, 0x1D, 0x4C, 0x1D, 0x4C});
  m.Put(0x50, 0, 50, {0x27, 0x10, 0x27, 0x10, 0x27, 0x10, 0x27, 0x10});
  // Byte 131 bit 7: the extended code at 192, 0x02 "100GBASE-SR4 or 25GBASE-SR": 100 Gb/s in
  // a QSFP's 4 lanes. Byte 140 FFh: the nominal rate is byte 222's, 103 x 250 MBd = 25.75 GBd.
  m.Put(0x50, 0, 131, {0x80});
  m.Put(0x50, 0, 140, {0xFF});
  m.Put(0x50, 0, 192, {0x02});
  m.Put(0x50, 0, 222, {0x67});
  m.Put(0x50, 0, 147, {0x00});  // 850 nm VCSEL
  m.Text(0x50, 0, 148, 16, "ACME");
  m.Put(0x50, 0, 165, {0x00, 0x02, 0xC9});
  m.Text(0x50, 0, 168, 16, "QSFP-100G-SR4");
  m.Text(0x50, 0, 184, 2, "B");
  m.Put(0x50, 0, 186, {0x42, 0x68});  // 17000 / 20 = 850 nm
  m.Text(0x50, 0, 196, 16, "QS0001");
  m.Text(0x50, 0, 212, 8, "26120601");
  m.Put(0x50, 0, 220, {0x08});  // average RX power
  // Page 03h: temperature 75 / -5 / 70 / 0 C; supply 3.6 / 3.0 / 3.5 / 3.1 V; RX 2.5 mW / 5 uW /
  // 2 mW / 10 uW; bias high alarm 20 mA below its high warning 30 mA (invalid); TX all zero.
  m.Put(0x50, 3, 128, {0x4B, 0x00, 0xFB, 0x00, 0x46, 0x00, 0x00, 0x00});
  m.Put(0x50, 3, 144, {0x8C, 0xA0, 0x75, 0x30, 0x88, 0xB8, 0x79, 0x18});
  m.Put(0x50, 3, 176, {0x61, 0xA8, 0x00, 0x32, 0x4E, 0x20, 0x00, 0x64});
  m.Put(0x50, 3, 184, {0x27, 0x10, 0x00, 0x00, 0x3A, 0x98, 0x00, 0x00});
  return m;
}

// A QSFP-DD 400G-FR4 (identifier 0x18, CMIS 5.0): four media lanes on bank 0, TX bias reported
// in units of 2 uA x 2 (page 01h byte 160 = 0x0F: bias, TX and RX power monitors, factor 01b).
inline FakeModule QsfpDd() {
  FakeModule m;
  m.Put(0x50, 0, 0, {0x18, 0x50, 0x00, 0x06});       // CMIS 5.0, paged, module state 3 (ready)
  m.Put(0x50, 0, 8, std::vector<uint8_t>(6, 0xFF));  // latched module flags: never read
  m.Put(0x50, 0, 14, {0x2D, 0x80, 0x80, 0x52});      // 45.5 C; 32850 -> 3.285 V
  m.Put(0x50, 0, 39, {0x07, 0x02, 0x00});            // firmware 7.2, no fault
  // SMF; application 1 (bytes 86..89): host interface 0x11 400GAUI-8 C2M (400 Gb/s, SFF-8024
  // Table 4-5), media 0x1D 400GBASE-FR4, 8 host and 4 media lanes; byte 90 FFh ends the list.
  m.Put(0x50, 0, 85, {0x02, 0x11, 0x1D, 0x84, 0x01, 0xFF});
  m.Text(0x50, 0, 129, 16, "ACME");
  m.Put(0x50, 0, 145, {0x00, 0x02, 0xC9});
  m.Text(0x50, 0, 148, 16, "QDD-400G-FR4");
  m.Text(0x50, 0, 164, 2, "C");
  m.Text(0x50, 0, 166, 16, "DD0001");
  m.Put(0x50, 1, 138, {0x66, 0x6C});  // 26220 x 0.05 = 1311 nm
  m.Put(0x50, 1, 142, {0x00});        // bank 0 only
  m.Put(0x50, 1, 151, {0x10});        // average RX power
  m.Put(0x50, 1, 160, {0x0F});
  // Page 11h: TX power 1 mW each; bias raw 4000 -> 4000 x 2 uA x 2 = 16 mA; RX power lane 1
  // 8000 -> 0.8 mW, lanes 2-4 0.
  for (int lane = 0; lane < 8; ++lane) {
    m.Put(0x50, 0x11, 154 + 2 * lane, {0x27, 0x10});
    m.Put(0x50, 0x11, 170 + 2 * lane, {0x0F, 0xA0});
  }
  m.Put(0x50, 0x11, 186, {0x1F, 0x40});
  m.Put(0x50, 0x11, 134, std::vector<uint8_t>(20, 0xFF));  // latched lane flags: never read
  // Page 02h: temperature 75 / -5 / 70 / 0 C; bias high alarm raw 10000 -> 40 mA with x2; RX
  // all zero (invalid).
  m.Put(0x50, 2, 128, {0x4B, 0x00, 0xFB, 0x00, 0x46, 0x00, 0x00, 0x00});
  m.Put(0x50, 2, 184, {0x27, 0x10, 0x00, 0x00, 0x1F, 0x40, 0x01, 0xF4});
  return m;
}

}  // namespace rdmascope::testing
