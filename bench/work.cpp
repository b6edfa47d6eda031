#include <iostream>
#include <map>
#include <string>
#include <vector>
int main() {
  std::map<std::string, std::vector<int>> m;
  for (int i = 0; i < 100; ++i) m[std::to_string(i)].push_back(i);
  std::cout << m.size() << "\n";
}
