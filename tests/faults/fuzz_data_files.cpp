// Owns the bounded fuzzing of the readers a user's own data enters through: NumPy .npy files (io::read_npy, for
// `prepare arrays`) and JPEG/PNG images (io::decode_image, then convert_channels and resize_crop_planar on what
// decodes, for `prepare images`). Seeds are valid files made here (npy versions 1-3 of several dtypes and shapes;
// gray, gray+alpha, RGB and RGBA PNGs; gray and RGB, baseline and progressive JPEGs, and both in the region layout
// `prepare images` stores, read by restart segment); each input is one of them with bytes flipped, cut or repeated,
// or with its header rewritten (npy shapes past int64, odd dtypes and header lengths; PNG and JPEG dimensions from 0
// to the formats' limits, the PNG chunk checksum recomputed so libpng reads them), or random bytes behind a real
// magic number. Every input must decode or be refused with a
// DataError naming the file: no crash, no other exception, and what decodes must be self-consistent.
// Usage: fuzz_data_files SCRATCH_DIR [--seed N] [--iterations N] [--seconds S]
#include <fmt/format.h>
#include <png.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <typeinfo>

// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>

#include "common/error.h"
#include "io/image_decode.h"
#include "io/image_resize.h"
#include "io/jpeg_encode.h"
#include "io/jpeg_window.h"
#include "io/npy_file.h"
#include "tests/faults/fuzz_support.h"

namespace {

namespace fs = std::filesystem;
using Rng = std::mt19937_64;
using ringtrain::io::DecodedImage;

enum class Format { npy, image };

struct Seed {
  std::string label;  // for the failure report
  Format format;
  std::string bytes;
};

int64_t uniform(Rng& rng, int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
}

std::string random_bytes(Rng& rng, std::size_t n) {
  std::string out(n, '\0');
  for (char& c : out) c = static_cast<char>(rng() & 0xff);
  return out;
}

// NEP 1: magic, version, little-endian header length (2 bytes in version 1, 4 after), a Python dict padded
// with spaces and ended by '\n' so the payload starts at a multiple of 64.
std::string npy_bytes(int version, const std::string& header_dict, const std::string& payload) {
  const std::size_t length_bytes = version == 1 ? 2 : 4;
  std::string header = header_dict;
  while ((8 + length_bytes + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(version);
  out += '\0';
  for (std::size_t i = 0; i < length_bytes; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + payload;
}

std::string npy_dict(const std::string& descr, const std::string& shape, const std::string& fortran = "False") {
  return fmt::format("{{'descr': '{}', 'fortran_order': {}, 'shape': {}, }}", descr, fortran, shape);
}

std::string png_bytes(int width, int height, uint32_t format, Rng& rng) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  image.format = format;
  const std::string pixels = random_bytes(rng, PNG_IMAGE_SIZE(image));
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&image, nullptr, &size, 0, pixels.data(), 0, nullptr))
    throw std::runtime_error(std::string("libpng cannot size the seed: ") + image.message);
  std::string out(size, '\0');
  if (!png_image_write_to_memory(&image, out.data(), &size, 0, pixels.data(), 0, nullptr))
    throw std::runtime_error(std::string("libpng cannot write the seed: ") + image.message);
  out.resize(size);
  return out;
}

std::string jpeg_bytes(int width, int height, int channels, bool progressive, Rng& rng) {
  jpeg_compress_struct info{};
  jpeg_error_mgr errors{};
  info.err = jpeg_std_error(&errors);  // a seed that cannot be written ends the fuzzer: a broken setup
  jpeg_create_compress(&info);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&info, &buffer, &size);
  info.image_width = static_cast<JDIMENSION>(width);
  info.image_height = static_cast<JDIMENSION>(height);
  info.input_components = channels;
  info.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&info);
  jpeg_set_quality(&info, 85, TRUE);
  if (progressive) jpeg_simple_progression(&info);
  jpeg_start_compress(&info, TRUE);
  const std::string pixels = random_bytes(rng, static_cast<std::size_t>(width * height * channels));
  while (info.next_scanline < info.image_height) {
    auto* row = reinterpret_cast<JSAMPROW>(const_cast<char*>(pixels.data()) +
                                           static_cast<std::size_t>(info.next_scanline) * width * channels);
    jpeg_write_scanlines(&info, &row, 1);
  }
  jpeg_finish_compress(&info);
  std::string out(reinterpret_cast<const char*>(buffer), size);
  jpeg_destroy_compress(&info);
  std::free(buffer);
  return out;
}

std::vector<Seed> make_seeds(Rng& rng) {
  std::vector<Seed> seeds;
  const std::pair<const char*, int> dtypes[] = {{"|u1", 1}, {"<i8", 8}, {"<i4", 4}, {"<f4", 4}, {"<u2", 2}};
  const std::pair<const char*, int64_t> shapes[] = {{"(3, 4, 5)", 60}, {"(6,)", 6}, {"(2, 3, 2, 2)", 24}, {"()", 1}};
  for (int version = 1; version <= 3; ++version)
    for (const auto& [descr, item] : dtypes)
      for (const auto& [shape, elements] : shapes)
        seeds.push_back({fmt::format("npy v{} {} {}", version, descr, shape), Format::npy,
                         npy_bytes(version, npy_dict(descr, shape), random_bytes(rng, static_cast<std::size_t>(item * elements)))});
  const std::pair<const char*, uint32_t> png_formats[] = {
      {"gray", PNG_FORMAT_GRAY}, {"gray+alpha", PNG_FORMAT_GA}, {"rgb", PNG_FORMAT_RGB}, {"rgba", PNG_FORMAT_RGBA}};
  for (const auto& [name, format] : png_formats)
    seeds.push_back({fmt::format("png {} 9x7", name), Format::image, png_bytes(9, 7, format, rng)});
  for (const int channels : {1, 3})
    for (const bool progressive : {false, true})
      seeds.push_back({fmt::format("jpeg {} channels{} 13x11", channels, progressive ? " progressive" : ""),
                       Format::image, jpeg_bytes(13, 11, channels, progressive, rng)});
  // In the region layout `prepare images` stores (restart segments, read by region), large enough for several.
  for (const int channels : {1, 3}) {
    const std::string plain = jpeg_bytes(71, 53, channels, false, rng);
    const auto rewritten = ringtrain::io::in_region_layout(
        std::span(reinterpret_cast<const uint8_t*>(plain.data()), plain.size()));
    if (!rewritten) throw std::runtime_error("the region layout's seed was not rewritten");
    seeds.push_back({fmt::format("jpeg {} channels 71x53 region layout", channels), Format::image,
                     std::string(rewritten->begin(), rewritten->end())});
  }
  return seeds;
}

void put_be32(std::string& bytes, std::size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) bytes[at + static_cast<std::size_t>(i)] = static_cast<char>((v >> (24 - 8 * i)) & 0xff);
}

// A dimension from the interesting ones: 0, small, around the formats' and our limits, the maximum.
uint32_t odd_dimension(Rng& rng, uint32_t max) {
  const uint32_t values[] = {0, 1, 2, 3, 255, 65535, 65536, 1000000, 1u << 20, 0x7fffffffu, max};
  return std::min(values[rng() % std::size(values)], max);
}

// PNG: IHDR is the first chunk (bytes 8-32): length, "IHDR", width, height, 5 bytes, CRC over type and data.
void rewrite_png_size(std::string& png, Rng& rng, std::string& notes) {
  if (png.size() < 33 || png.compare(12, 4, "IHDR") != 0) return;
  const uint32_t width = odd_dimension(rng, 0xffffffffu), height = odd_dimension(rng, 0xffffffffu);
  put_be32(png, 16, width);
  put_be32(png, 20, height);
  const uLong crc = crc32(0, reinterpret_cast<const Bytef*>(png.data() + 12), 17);
  put_be32(png, 29, static_cast<uint32_t>(crc));
  notes += fmt::format(" png size {}x{}", width, height);
}

// JPEG: the start-of-frame marker (FFC0 baseline, FFC2 progressive) holds height then width, 16 bits each.
void rewrite_jpeg_size(std::string& jpeg, Rng& rng, std::string& notes) {
  for (std::size_t i = 2; i + 9 < jpeg.size(); ++i) {
    const auto marker = static_cast<unsigned char>(jpeg[i + 1]);
    if (static_cast<unsigned char>(jpeg[i]) != 0xff || (marker != 0xc0 && marker != 0xc2)) continue;
    const uint32_t height = odd_dimension(rng, 65535), width = odd_dimension(rng, 65535);
    jpeg[i + 5] = static_cast<char>(height >> 8), jpeg[i + 6] = static_cast<char>(height & 0xff);
    jpeg[i + 7] = static_cast<char>(width >> 8), jpeg[i + 8] = static_cast<char>(width & 0xff);
    notes += fmt::format(" jpeg size {}x{}", width, height);
    return;
  }
}

// A header a NumPy user could not write, or one NumPy writes that we must refuse or read right.
std::string odd_npy(Rng& rng, std::string& notes) {
  const char* shapes[] = {"(99999999999999999999,)", "(4611686018427387904, 4)", "(3037000500, 3037000500)",
                          "(-1, 3)", "(0,)", "(0, 5)", "(2,3", "[2, 3]", "(1, 2, 3, 4, 5, 6, 7, 8)", "(1e3,)"};
  const char* descrs[] = {"<u1", ">i4", "|b1", "<c8", "<f2", "|O", "<i16", "u1", "<U3", "<i4'"};
  const std::string shape = shapes[rng() % std::size(shapes)], descr = descrs[rng() % std::size(descrs)];
  const bool fortran = rng() % 8 == 0;
  notes += fmt::format(" npy header descr {} shape {}{}", descr, shape, fortran ? " fortran" : "");
  std::string dict = npy_dict(descr, shape, fortran ? "True" : "False");
  if (rng() % 6 == 0) dict.erase(static_cast<std::size_t>(uniform(rng, 0, static_cast<int64_t>(dict.size()) - 1)));
  return npy_bytes(static_cast<int>(uniform(rng, 1, 3)), dict, random_bytes(rng, static_cast<std::size_t>(uniform(rng, 0, 64))));
}

// One input: a mutated seed, a rewritten header, or random bytes behind a magic number.
std::string make_input(const std::vector<Seed>& seeds, Rng& rng, Format& format, std::string& notes) {
  const Seed& seed = seeds[rng() % seeds.size()];
  format = seed.format;
  std::string bytes = seed.bytes;
  notes = seed.label + ":";
  switch (rng() % 8) {
    case 0:
      if (format == Format::npy) bytes = odd_npy(rng, notes);
      else if (bytes[0] == '\x89') rewrite_png_size(bytes, rng, notes);
      else rewrite_jpeg_size(bytes, rng, notes);
      break;
    case 1: {
      const std::string magic[] = {std::string("\x93NUMPY\x01\x00", 8), std::string("\x93NUMPY\x02\x00", 8),
                                   "\x89PNG\r\n\x1a\n", "\xff\xd8\xff"};
      const std::size_t k = rng() % std::size(magic);
      format = k < 2 ? Format::npy : Format::image;
      bytes = magic[k] + random_bytes(rng, static_cast<std::size_t>(uniform(rng, 0, 300)));
      notes += " random bytes after a magic number";
      break;
    }
    default: notes += " bytes mutated";
  }
  if (rng() % 3 != 0) ringtrain::fuzz::mutate_bytes(bytes, rng);
  return bytes;
}

// A JPEG's bytes through the windowed decoder training uses: the whole image and a window, each to a small sample.
// Its DataError says what is wrong with the bytes; the file is named here, as the loader names shard and sample.
std::string read_window(const fs::path& file) {
  const std::vector<uint8_t> data = ringtrain::io::read_image_file(file);
  if (!ringtrain::io::is_jpeg(data)) return "";
  try {
    const ringtrain::io::JpegHeader header = ringtrain::io::read_jpeg_header(data);
    const auto h = static_cast<float>(header.height), w = static_cast<float>(header.width);
    for (const ringtrain::io::PixelWindow window : {ringtrain::io::PixelWindow{0, 0, h, w},
                                                    ringtrain::io::PixelWindow{h / 3, w / 4, h / 2, w / 2},
                                                    ringtrain::io::PixelWindow{h * 0.6f, w * 0.7f, h / 3, w / 4}}) {
      ringtrain::io::DecodedWindow out;
      ringtrain::io::decode_jpeg_window(data, {window, 5, 7, 3, window.top == 0}, out, header);
      if (out.channels != 3 || out.rows < 1 || out.columns < 1 ||
          out.pixels.size() != static_cast<std::size_t>(out.rows) * static_cast<std::size_t>(out.columns) * 3)
        return fmt::format("decode_jpeg_window returned {}x{}x{} with {} bytes", out.rows, out.columns, out.channels,
                           out.pixels.size());
    }
  } catch (const ringtrain::DataError& e) {
    throw ringtrain::DataError(fmt::format("'{}': {}", file.string(), e.what()));
  }
  return "";
}

// Throws what the reader throws; checks what a successful read promises.
std::string read_back(const fs::path& file, Format format) {
  if (format == Format::npy) {
    const ringtrain::io::NpyArray a = ringtrain::io::read_npy(file);
    const int item = ringtrain::io::npy_item_size(a.descr);
    if (item == 0 || a.bytes.size() != static_cast<std::size_t>(a.elements()) * static_cast<std::size_t>(item))
      return fmt::format("read_npy returned descr '{}' with {} bytes for {} elements", a.descr, a.bytes.size(), a.elements());
    return "";
  }
  const DecodedImage image = ringtrain::io::decode_image(file);
  const auto pixels = static_cast<std::size_t>(image.width) * static_cast<std::size_t>(image.height);
  if ((image.channels != 1 && image.channels != 3 && image.channels != 4) || image.width <= 0 || image.height <= 0 ||
      image.pixels.size() != pixels * static_cast<std::size_t>(image.channels))
    return fmt::format("decode_image returned {}x{}x{} with {} bytes", image.width, image.height, image.channels,
                       image.pixels.size());
  for (const int channels : {1, 3, 4}) {
    const DecodedImage converted = ringtrain::io::convert_channels(image, channels);
    std::vector<uint8_t> out(static_cast<std::size_t>(channels) * 5 * 7);
    ringtrain::io::resize_crop_planar(converted, {5, 7}, out);
  }
  return read_window(file);
}

// "" when the input decoded or was refused as it should be; else what went wrong.
std::string check(const fs::path& file, Format format, bool& refused) {
  try {
    refused = false;
    return read_back(file, format);
  } catch (const ringtrain::DataError& e) {
    refused = true;
    const std::string message = e.what();
    return message.find(file.string()) == std::string::npos ? "DataError names no file: " + message : "";
  } catch (const std::exception& e) {
    return fmt::format("{} (not DataError): {}", typeid(e).name(), e.what());
  } catch (...) {
    return "an exception that is no std::exception";
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args;
  const ringtrain::fuzz::Options options = ringtrain::fuzz::parse_options(argc, argv, args);
  if (args.size() != 1) {
    std::cerr << "usage: fuzz_data_files SCRATCH_DIR [--seed N] [--iterations N] [--seconds S]\n";
    return 2;
  }
  const fs::path dir = fs::path(args[0]) / fmt::format("fuzz_data_files-{}", ::getpid());
  fs::create_directories(dir);
  ringtrain::fuzz::install_crash_report();
  Rng rng(options.seed);
  const std::vector<Seed> seeds = make_seeds(rng);
  const ringtrain::fuzz::Budget budget(options);
  long done = 0, decoded = 0, refused_count = 0, failures = 0;
  for (; budget.more(done); ++done) {
    Format format = Format::npy;
    std::string notes;
    const std::string bytes = make_input(seeds, rng, format, notes);
    const fs::path file = dir / (format == Format::npy ? "input.npy" : "input.img");
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
    notes = fmt::format("iteration {}: {}", done, notes);
    ringtrain::fuzz::set_current_input(notes);
    const double started = budget.elapsed_s();
    bool refused = false;
    const std::string problem = check(file, format, refused);
    if (!problem.empty()) {
      std::cerr << "FAIL " << notes << "\n  " << problem << "\n";
      ++failures;
    }
    if (problem.empty()) ++(refused ? refused_count : decoded);
    if (budget.elapsed_s() - started > 1.0)  // a slow input is a hang in the making: say which
      std::cerr << "slow (" << budget.elapsed_s() - started << " s): " << notes << "\n";
  }
  fs::remove_all(dir);
  std::cout << "fuzz_data_files: seed " << options.seed << ", " << done << " inputs from " << seeds.size()
            << " seeds in " << budget.elapsed_s() << " s: " << decoded << " read, " << refused_count
            << " refused with DataError naming the file, " << failures << " failures\n";
  return failures == 0 && decoded > 0 && refused_count > 0 ? 0 : 1;
}
