# Writes the schema file IN as a C++ raw string into OUT (see json.h: embedded_schema()).
file(READ ${IN} text)
file(WRITE ${OUT} "// Generated from corral.fbs by embed_schema.cmake. Do not edit.\n"
  "#include <string_view>\n"
  "namespace corral::proto {\n"
  "std::string_view embedded_schema() {\n"
  "  static constexpr char kSchema[] = R\"corral_fbs(${text})corral_fbs\";\n"
  "  return {kSchema, sizeof kSchema - 1};\n"
  "}\n"
  "}  // namespace corral::proto\n")
